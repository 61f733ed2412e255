package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
)

// kubeExample is the Kubernetes example docs/fleet.md shows.
const kubeExample = "../../examples/fleet/kubernetes.yaml"

// kubeObject is what the check reads of a Kubernetes object.
type kubeObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Data       map[string]string `yaml:"data"`
	Spec       struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Args    []string `yaml:"args"`
					EnvFrom []struct {
						SecretRef struct {
							Name string `yaml:"name"`
						} `yaml:"secretRef"`
					} `yaml:"envFrom"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					ReadinessProbe probe `yaml:"readinessProbe"`
					LivenessProbe  probe `yaml:"livenessProbe"`
					VolumeMounts   []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name      string `yaml:"name"`
					ConfigMap struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		MinAvailable    int               `yaml:"minAvailable"`
		SessionAffinity string            `yaml:"sessionAffinity"`
		ServiceSelector map[string]string `yaml:"-"`
		Ports           []struct {
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// Issue 17: the Kubernetes example of docs/fleet.md, checked as far as
// this machine can without a cluster: it parses; the Deployment's
// readiness and liveness probes are toolwire's health endpoints on the
// port serve listens on; its arguments are a serve command toolwire
// accepts, with a drain shorter than the pod's grace period; the store
// URL and the passphrase come from the Secret it names, which has both;
// its configuration (the ConfigMap, mounted where --config reads it) loads;
// the PodDisruptionBudget and the Service select the Deployment's pods,
// and the Service has no session affinity. The HAProxy example is valid
// to haproxy itself (the fleet tests run it).
func TestFleetDeploymentExamples(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(kubeExample)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*kubeObject{}
	var service map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", kubeExample, err)
		}
		var o kubeObject
		if err := node.Decode(&o); err != nil {
			t.Fatal(err)
		}
		if byKind[o.Kind] != nil {
			t.Fatalf("two %s objects", o.Kind)
		}
		byKind[o.Kind] = &o
		if o.Kind == "Service" {
			_ = node.Decode(&service)
		}
	}
	for _, kind := range []string{"Secret", "ConfigMap", "Deployment", "PodDisruptionBudget", "Service"} {
		if byKind[kind] == nil {
			t.Fatalf("%s has no %s", kubeExample, kind)
		}
	}
	dep, secret, cm, pdb, svc := byKind["Deployment"], byKind["Secret"], byKind["ConfigMap"], byKind["PodDisruptionBudget"], byKind["Service"]
	if dep.APIVersion != "apps/v1" || pdb.APIVersion != "policy/v1" || svc.APIVersion != "v1" {
		t.Errorf("API versions: Deployment %s, PodDisruptionBudget %s, Service %s", dep.APIVersion, pdb.APIVersion, svc.APIVersion)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(dep.Spec.Template.Spec.Containers))
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	labels := dep.Spec.Template.Metadata.Labels
	if dep.Spec.Replicas < 2 || !equalLabels(dep.Spec.Selector.MatchLabels, labels) {
		t.Errorf("the Deployment: %d replicas, selector %v over pods labelled %v", dep.Spec.Replicas, dep.Spec.Selector.MatchLabels, labels)
	}

	// The command: a serve toolwire accepts, on the container's port.
	args := ctr.Args
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, isTerminal: func() bool { return false }, lookupEnv: lookupIn(nil)}
	cmd, rest, err := newRootCommand(e).Find(args)
	if err != nil || cmd.Name() != "serve" {
		t.Fatalf("args %q: command %v, %v; want serve", args, cmd, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	httpAddr, _ := cmd.Flags().GetString("http")
	grace, _ := cmd.Flags().GetDuration("drain-grace")
	configs, _ := cmd.Flags().GetStringArray("config")
	if len(configs) != 1 {
		t.Fatalf("args %q name %d configuration files, want 1", args, len(configs))
	}
	configPath := configs[0]
	_, port, _ := strings.Cut(httpAddr, ":")
	portByName := map[string]int{}
	for _, p := range ctr.Ports {
		portByName[p.Name] = p.ContainerPort
	}
	if strconv.Itoa(portByName["http"]) != port {
		t.Errorf("serve listens on %q, the container's port http is %d", httpAddr, portByName["http"])
	}
	if d := time.Duration(dep.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; d < grace+gateway.DrainBound {
		t.Errorf("terminationGracePeriodSeconds %s is shorter than --drain-grace %s plus the drain's %s", d, grace, gateway.DrainBound)
	}
	for name, p := range map[string]probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
		want := gateway.ReadinessPath
		if name == "liveness" {
			want = gateway.LivenessPath
		}
		if p.HTTPGet.Path != want || portByName[p.HTTPGet.Port] == 0 {
			t.Errorf("the %s probe: GET %s on port %q; want %s on the serve port", name, p.HTTPGet.Path, p.HTTPGet.Port, want)
		}
	}

	// The store and the passphrase, from the Secret.
	if len(ctr.EnvFrom) != 1 || ctr.EnvFrom[0].SecretRef.Name != secret.Metadata.Name {
		t.Errorf("the container's environment comes from %+v, want the Secret %s", ctr.EnvFrom, secret.Metadata.Name)
	}
	for _, k := range []string{storeEnv, "TOOLWIRE_PASSPHRASE"} {
		if secret.StringData[k] == "" {
			t.Errorf("the Secret has no %s", k)
		}
	}
	if !strings.HasPrefix(secret.StringData[storeEnv], "postgres://") {
		t.Errorf("the Secret's %s is not a PostgreSQL URL", storeEnv)
	}

	// The configuration: mounted where --config reads it, and loadable.
	mounted := ""
	for _, m := range ctr.VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap.Name == cm.Metadata.Name {
				mounted = m.MountPath
			}
		}
	}
	file := filepath.Base(configPath)
	if filepath.Dir(configPath) != mounted || cm.Data[file] == "" {
		t.Fatalf("--config %s is not the ConfigMap's %q mounted at %q", configPath, file, mounted)
	}
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, []byte(cm.Data[file]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Errorf("the ConfigMap's configuration: %v", err)
	}

	// The budget and the Service select the Deployment's pods; no affinity.
	if !equalLabels(pdb.Spec.Selector.MatchLabels, labels) || pdb.Spec.MinAvailable < 1 || pdb.Spec.MinAvailable >= dep.Spec.Replicas {
		t.Errorf("the PodDisruptionBudget: minAvailable %d of %d, selector %v", pdb.Spec.MinAvailable, dep.Spec.Replicas, pdb.Spec.Selector.MatchLabels)
	}
	spec, _ := service["spec"].(map[string]any)
	sel := map[string]string{}
	if m, ok := spec["selector"].(map[string]any); ok {
		for k, v := range m {
			sel[k], _ = v.(string)
		}
	}
	if !equalLabels(sel, labels) || (svc.Spec.SessionAffinity != "" && svc.Spec.SessionAffinity != "None") {
		t.Errorf("the Service: selector %v, sessionAffinity %q; want the pods' labels and none", sel, svc.Spec.SessionAffinity)
	}
	if len(svc.Spec.Ports) != 1 || portByName[svc.Spec.Ports[0].TargetPort] == 0 {
		t.Errorf("the Service's ports %+v: want the serve port", svc.Spec.Ports)
	}

	if path, err := exec.LookPath("haproxy"); err == nil {
		if out, err := exec.Command(path, "-c", "-f", haproxyExample).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c -f %s: %v\n%s", haproxyExample, err, out)
		}
	}
}

func equalLabels(a, b map[string]string) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
