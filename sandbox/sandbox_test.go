package sandbox

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Plan confines nothing off Linux")
	}
	full := Kernel{LandlockABI: 7, Seccomp: true, UserNamespaces: true}
	none := Policy{MaxProcesses: 10}
	proxy := Policy{Network: NetworkProxy, MaxProcesses: 10}
	for _, c := range []struct {
		name    string
		p       Policy
		k       Kernel
		want    string
		refused bool // Err is not nil
	}{
		{"everything", none, full, "landlock v7, seccomp, net: none", false},
		{"a newer kernel", none, Kernel{LandlockABI: 11, Seccomp: true, UserNamespaces: true}, "landlock v7, seccomp, net: none", false},
		{"a proxy", proxy, full, "landlock v7, seccomp, net: proxy", false},
		{"open", Policy{Network: NetworkOpen}, full, "landlock v7, seccomp, net: open", false},
		{"no TCP rules, no network", none, Kernel{LandlockABI: 3, Seccomp: true, UserNamespaces: true}, "landlock v3, seccomp, net: none", false},
		{"no TCP rules, a proxy", proxy, Kernel{LandlockABI: 3, Seccomp: true, UserNamespaces: true},
			"landlock v3, seccomp, net: not confined; not applied: Landlock TCP rules (ABI 4, Linux 6.7; this kernel has ABI 3), so the egress proxy cannot be enforced", true},
		{"no seccomp", none, Kernel{LandlockABI: 4, UserNamespaces: true},
			"landlock v4, net: none; not applied: seccomp (no ptrace, mount, namespace or BPF filter)", true},
		{"neither", none, Kernel{UserNamespaces: true},
			"not confined (Landlock (filesystem rules need Linux 5.13 or later with Landlock enabled); seccomp (no ptrace, mount, namespace or BPF filter); network confinement (needs seccomp or Landlock ABI 4))", true},
		{"no user namespaces", none, Kernel{LandlockABI: 7, Seccomp: true},
			"landlock v7, seccomp, net: none; not applied: a bound on processes (needs unprivileged user namespaces)", true},
		{"root", none, Kernel{LandlockABI: 7, Seccomp: true, UserNamespaces: true, Root: true},
			"landlock v7, seccomp, net: none; not applied: a bound on processes (the kernel does not hold root to RLIMIT_NPROC, and no pids cgroup could be made)", false},
		{"root, with a pids cgroup", none, Kernel{LandlockABI: 7, Seccomp: true, Root: true, PidsCgroup: "/sys/fs/cgroup/pids"}, "landlock v7, seccomp, net: none", false},
		{"no bound asked", Policy{}, Kernel{LandlockABI: 7, Seccomp: true}, "landlock v7, seccomp, net: none", false},
	} {
		conf := Plan(c.p, c.k)
		if got := conf.String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		err := conf.Err()
		if (err != nil) != c.refused || (err != nil && !errors.Is(err, ErrUnavailable)) {
			t.Errorf("%s: Err() = %v, want refused %v", c.name, err, c.refused)
		}
	}
	short := Plan(proxy, Kernel{LandlockABI: 3, Seccomp: true, Root: true}).Short()
	if want := "landlock v3, seccomp, net: not confined; not applied: Landlock TCP rules; a bound on processes"; short != want {
		t.Errorf("Short() = %q, want %q", short, want)
	}
	if !strings.HasPrefix(Plan(none, Kernel{}).Short(), "not confined") {
		t.Errorf("Short() of nothing = %q", Plan(none, Kernel{}).Short())
	}
}
