package workspace_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/workspace"
)

// The approver's operator settings come from the configuration at Open
// and at every reload, serve's --operator-wait keeping its place over
// them; a reload whose webhook has no secret in its environment is
// refused and changes nothing; the secret is masked in the logs.
func TestOperatorSettingsFollowTheConfiguration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := demoServer + "security:\n  pins: off\n"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := func(name string) (string, bool) {
		if name == "HOOK_SECRET" {
			return "the-hook-secret", true
		}
		return "", false
	}
	approver := gateway.NewApprover(gateway.ApprovalPolicy{})
	w, err := workspace.Open(ctx, f.load(t, base), &workspace.Options{Confirmer: approver, LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ops := approver.Operators()
	if ops.Wait != workspace.DefaultOperatorWait || ops.Queue == nil || ops.Grants == nil || ops.Queue != w.Pending() {
		t.Fatalf("at Open: %+v", ops)
	}
	reload := func(cfg string) error {
		next := f.load(t, cfg)
		_, err := w.Reload(ctx, func() (*config.File, *workspace.ReloadOptions, error) { return next, nil, nil })
		return err
	}
	hook := "gateway:\n  approvals:\n    operatorWait: 0s\n    webhook: {url: 'http://127.0.0.1:9/hook', secretEnv: %s}\n"
	if err := reload(base + strings.Replace(hook, "%s", "HOOK_SECRET", 1)); err != nil {
		t.Fatal(err)
	}
	ops = approver.Operators()
	if ops.Wait != 0 || ops.Webhook == nil || string(ops.Webhook.Secret) != "the-hook-secret" {
		t.Fatalf("after the reload: %+v", ops)
	}
	if got := w.Secrets().String("x the-hook-secret y"); strings.Contains(got, "the-hook-secret") {
		t.Fatalf("the webhook's secret is not masked: %q", got)
	}
	err = reload(base + strings.Replace(hook, "%s", "NOT_SET", 1))
	if err == nil || !strings.Contains(err.Error(), "gateway.approvals.webhook.secretEnv") {
		t.Fatalf("a webhook without its secret: %v", err)
	}
	if got := approver.Operators(); got.Webhook == nil || got.Wait != 0 {
		t.Fatalf("a refused reload changed the operators: %+v", got)
	}

	// The flag's wait holds over the file's.
	flagged := gateway.NewApprover(gateway.ApprovalPolicy{})
	wait := 5 * time.Second
	w2, err := workspace.Open(ctx, f.load(t, base+"gateway:\n  approvals:\n    operatorWait: 1m\n"), &workspace.Options{Confirmer: flagged, OperatorWait: &wait})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if got := flagged.Operators().Wait; got != wait {
		t.Fatalf("with the flag: %s, want %s", got, wait)
	}
}
