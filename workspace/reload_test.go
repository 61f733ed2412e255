package workspace_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/workspace"
)

// A reload the running workspace cannot take changes nothing, says why,
// and is audited as refused; one it can take applies its approvals and
// roles from the next call on.
func TestReloadRefusesWhatNeedsARestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	file := f.demoFile(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	approver := gateway.NewApprover(gateway.ApprovalPolicy{Write: gateway.Allow})
	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: approver})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := w.Handler(w.Gateway(nil), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	base := demoServer + "audit:\n  file: audit.jsonl\nsecurity:\n  pins: off\n"
	hash := gateway.HashToken("a-token-of-the-reload-test")
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"security", demoServer + "audit:\n  file: audit.jsonl\nsecurity:\n  pins: warn\n", "[security] changed"},
		{"audit", demoServer + "audit:\n  file: other.jsonl\nsecurity:\n  pins: off\n", "[audit] changed"},
		{"authentication on", base + "gateway:\n  tokens:\n    - sha256: " + hash + "\n      subject: a\n      role: r\n  roles:\n    r: [\"*\"]\n", "caller authentication turned on"},
	} {
		next := f.load(t, tc.cfg)
		_, err := w.Reload(ctx, func() (*config.File, *workspace.ReloadOptions, error) { return next, nil, nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, workspace.ErrNeedsRestart) {
			t.Errorf("%s: Reload = %v, want an error wrapping ErrNeedsRestart saying %q", tc.name, err, tc.want)
		}
		if w.File() != file {
			t.Errorf("%s: the workspace's configuration changed on a refused reload", tc.name)
		}
	}

	// Approvals come from the new configuration: write calls are now
	// denied by policy.
	next := f.load(t, base+"gateway:\n  approvals:\n    write: deny\n")
	if _, err := w.Reload(ctx, func() (*config.File, *workspace.ReloadOptions, error) { return next, nil, nil }); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if w.File() != next {
		t.Error("the workspace's configuration is not the reloaded one")
	}
	res := w.Executor().Call(ctx, "demo__write_note", []byte(`{"title":"t","body":"b"}`))
	if !res.IsError || !strings.Contains(res.Message, "refuses write calls") {
		t.Errorf("a write call after approvals.write became deny = %+v, want it refused by policy", res)
	}
	var reloads []string
	for _, ev := range f.auditEvents(t) {
		if ev.Kind == audit.ConfigReloaded {
			reloads = append(reloads, ev.Reason)
		}
	}
	if want := []string{"refused", "refused", "refused", ""}; strings.Join(reloads, ",") != strings.Join(want, ",") {
		t.Errorf("config.reloaded reasons = %q, want %q", reloads, want)
	}
}
