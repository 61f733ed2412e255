package workspace_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

// Rules reload with the rest: a reload whose rule does not fit a tool is
// refused and the running rules stay; one that fits applies to the next
// call; one without a policy removes it.
func TestPolicyReloads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := demoServer + "audit:\n  file: audit.jsonl\nsecurity:\n  pins: off\ngateway:\n  approvals:\n    write: allow\n"
	rule := func(when string) string {
		return "policy:\n  rules:\n    - name: shared-only\n      tools: [demo__write_note]\n      when: '" + when + "'\n      decision: deny\n      reason: under /srv/shared only\n"
	}
	file := f.load(t, base+rule(`!within(args.title, "/srv/shared")`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{Write: gateway.Allow})})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	outside := []byte(`{"title":"/etc/x","body":"b"}`)
	call := func() *tool.Result { return w.Executor().Call(ctx, "demo__write_note", outside) }
	if res := call(); res.Reason != tool.ReasonPolicy {
		t.Fatalf("before the reload: %+v, want denied by the rule", res)
	}

	reload := func(cfg string) error {
		next := f.load(t, cfg)
		_, err := w.Reload(ctx, func() (*config.File, *workspace.ReloadOptions, error) { return next, nil, nil })
		return err
	}
	// A misspelt argument: refused, naming the line; the rule stays.
	err = reload(base + rule(`!within(args.titel, "/srv/shared")`))
	if !errors.Is(err, workspace.ErrPolicy) || !strings.Contains(err.Error(), "titel") || !strings.Contains(err.Error(), ".yaml:") {
		t.Errorf("Reload with a misspelt argument = %v, want ErrPolicy naming the file and titel", err)
	}
	if res := call(); res.Reason != tool.ReasonPolicy {
		t.Errorf("after a refused reload: %+v, want still denied", res)
	}
	// A rule that lets /etc through: the call runs.
	if err := reload(base + rule(`!within(args.title, "/etc")`)); err != nil {
		t.Fatal(err)
	}
	if res := call(); res.IsError {
		t.Errorf("after the reload: %+v, want it run", res)
	}
	if res := w.Executor().Call(ctx, "demo__write_note", []byte(`{"title":"/srv/shared/a","body":"b"}`)); res.Reason != tool.ReasonPolicy {
		t.Errorf("after the reload, outside /etc: %+v, want denied by the new rule", res)
	}
	// No policy section: no rules.
	if err := reload(base); err != nil {
		t.Fatal(err)
	}
	if res := w.Executor().Call(ctx, "demo__write_note", []byte(`{"title":"/srv/shared/a","body":"b"}`)); res.IsError {
		t.Errorf("without a policy: %+v, want it run", res)
	}
}
