package approval

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwire/toolwire/tool"
)

func TestGrantIsBoundAndExpires(t *testing.T) {
	t.Parallel()
	f := NewFiles(filepath.Join(t.TempDir(), "sub", "approvals.json"))
	now := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	key := tool.ApprovalKey{Caller: "ann", Tool: "mail__send", Definition: "d1", Args: "a1", Policy: "p1"}
	args, err := f.Grant(t.Context(), Args, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	toolKey := key
	toolKey.Tool = "files__write"
	wide, err := f.Grant(t.Context(), Tool, toolKey, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	with := func(k tool.ApprovalKey, change func(*tool.ApprovalKey)) tool.ApprovalKey { change(&k); return k }
	for _, tc := range []struct {
		name string
		key  tool.ApprovalKey
		want string
	}{
		{"same call", key, args.ID},
		{"other arguments", with(key, func(k *tool.ApprovalKey) { k.Args = "a2" }), ""},
		{"other caller", with(key, func(k *tool.ApprovalKey) { k.Caller = "bob" }), ""},
		{"changed tool", with(key, func(k *tool.ApprovalKey) { k.Definition = "d2" }), ""},
		{"changed policy", with(key, func(k *tool.ApprovalKey) { k.Policy = "p2" }), ""},
		{"other tool", with(key, func(k *tool.ApprovalKey) { k.Tool = "mail__delete" }), ""},
		{"tool scope, other arguments", with(toolKey, func(k *tool.ApprovalKey) { k.Args = "zzz" }), wide.ID},
		{"tool scope, changed tool", with(toolKey, func(k *tool.ApprovalKey) { k.Definition = "d9" }), ""},
	} {
		if got, err := f.Approved(t.Context(), tc.key); err != nil || got != tc.want {
			t.Errorf("%s: Approved = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	info, err := os.Stat(f.Path())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("approvals file: %v, %v; want mode 0600", info, err)
	}

	now = now.Add(20 * time.Minute) // past the tool scope's quarter hour
	if got, _ := f.Approved(t.Context(), toolKey); got != "" {
		t.Errorf("an expired approval applies: %s", got)
	}
	list, err := f.List(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != args.ID {
		t.Errorf("List = %+v, %v; want the unexpired one", list, err)
	}
	if err := f.Revoke(t.Context(), args.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Approved(t.Context(), key); got != "" {
		t.Errorf("a revoked approval applies: %s", got)
	}
	if err := f.Revoke(t.Context(), args.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Revoke again = %v, want ErrNotFound", err)
	}
}

func TestCorruptFileApprovesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "approvals.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"approvals":[{"id":"x","scope":"tool"`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewFiles(path)
	if id, err := f.Approved(t.Context(), tool.ApprovalKey{}); id != "" || err == nil {
		t.Errorf("Approved = %q, %v; want none and an error", id, err)
	}
	if _, err := f.Grant(t.Context(), Tool, tool.ApprovalKey{Tool: "t"}, time.Minute); err == nil {
		t.Error("Grant over a corrupt file succeeded, losing what it held")
	}
}

// The executor consults the approvals before its confirmer, for the
// caller they are bound to only.
func TestExecutorRunsApprovedCallsWithoutAsking(t *testing.T) {
	t.Parallel()
	f := NewFiles(filepath.Join(t.TempDir(), "approvals.json"))
	var asked int
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: tool.ConfirmFunc(func(_ context.Context, pc tool.PendingCall) (bool, error) {
		asked++
		if pc.Key.Tool == "" {
			return true, nil // nothing to bind an approval to
		}
		_, err := f.Grant(t.Context(), Args, pc.Key, time.Hour)
		return err == nil, err
	})})
	if err := reg.Register(&tool.Tool{Name: "x__w", Tier: tool.Write, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Approvals: f})
	ctx := t.Context()
	for range 3 {
		if res := ex.Call(ctx, "x__w", json.RawMessage(`{"a":1}`)); res.IsError {
			t.Fatal(res.Message)
		}
	}
	if asked != 1 {
		t.Errorf("asked %d times, want once (then approved)", asked)
	}
	// Through a gateway, unauthenticated: the terminal's approval does not apply.
	gw := tool.WithClient(ctx, tool.Client{Protocol: "2025-11-25", Name: "c"})
	ex.Call(gw, "x__w", json.RawMessage(`{"a":1}`))
	// Another caller: neither.
	ex.Call(tool.WithIdentity(ctx, "bob"), "x__w", json.RawMessage(`{"a":1}`))
	if asked != 3 {
		t.Errorf("asked %d times, want 3: an approval covers its own caller only", asked)
	}
}
