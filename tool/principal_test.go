package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

const rawToken = "eyJhbGciOiJFUzI1NiJ9.caller-token-that-must-not-print.sig"

// A caller's token never prints: not with any fmt verb, not inside a
// Principal printed whole (exported or unexported field), not in slog
// output, not as JSON or text. Reveal is the one way to it.
func TestBearerTokenNeverPrints(t *testing.T) {
	t.Parallel()
	tok := tool.NewBearerToken(rawToken)
	p := tool.Principal{Issuer: "https://idp.example.com", Subject: "alice", Token: tok, Expiry: time.Unix(1e9, 0)}
	type holder struct {
		p tool.Principal // unexported: fmt reaches it by reflection alone
	}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%T"} {
		out = append(out, fmt.Sprintf(verb, tok), fmt.Sprintf(verb, p), fmt.Sprintf(verb, &p), fmt.Sprintf(verb, holder{p}), fmt.Sprintf(verb, []tool.Principal{p}))
	}
	out = append(out, fmt.Sprint(tok, p), fmt.Sprintln(p), tok.String(), tok.GoString())
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("call", "token", tok, "principal", p, "holder", holder{p})
	}
	out = append(out, buf.String())
	for _, v := range []any{tok, p, map[string]any{"p": p}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		out = append(out, string(b))
	}
	text, _ := tok.MarshalText()
	out = append(out, string(text))
	for _, s := range out {
		if strings.Contains(s, "caller-token") || strings.Contains(s, fmt.Sprintf("%x", rawToken)[:20]) {
			t.Errorf("the token printed: %s", s)
		}
	}
	if !strings.Contains(fmt.Sprintf("%v", p), "[redacted]") || !strings.Contains(buf.String(), "[redacted]") {
		t.Errorf("a printed principal does not say the token was redacted: %v / %s", p, buf.String())
	}
	if tok.Reveal() != rawToken {
		t.Errorf("Reveal = %q, want the token", tok.Reveal())
	}
	if z := (tool.BearerToken{}); !z.IsZero() || z.Reveal() != "" || tool.NewBearerToken("").IsZero() != true || tok.IsZero() {
		t.Error("IsZero is wrong for the zero value, an empty token, or a token")
	}
}

// A context carries a principal only with a subject: one without is no
// caller, so that a source that needs one fails closed.
func TestPrincipalFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, ok := tool.PrincipalFrom(ctx); ok {
		t.Error("PrincipalFrom found a principal in an empty context")
	}
	if _, ok := tool.PrincipalFrom(tool.WithPrincipal(ctx, tool.Principal{Issuer: "https://idp", Token: tool.NewBearerToken("x")})); ok {
		t.Error("PrincipalFrom accepted a principal without a subject")
	}
	p, ok := tool.PrincipalFrom(tool.WithPrincipal(ctx, tool.Principal{Issuer: "https://idp", Subject: "bob", Token: tool.NewBearerToken("x")}))
	if !ok || p.Subject != "bob" || p.Issuer != "https://idp" || p.Token.Reveal() != "x" {
		t.Errorf("PrincipalFrom = %+v, %v; want bob of https://idp with his token", p, ok)
	}
}

// The identity a handler notes reaches the call's outcome event, executed
// or errored, and no other event; a call whose handler notes none has
// none.
func TestUpstreamIdentityOnOutcomeEvents(t *testing.T) {
	t.Parallel()
	noting := func(id string, fail bool) tool.Handler {
		return func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			tool.NoteUpstreamIdentity(ctx, "not this one")
			tool.NoteUpstreamIdentity(ctx, id) // the last note wins
			if fail {
				return nil, errors.New("upstream said no")
			}
			return tool.TextResult("ok"), nil
		}
	}
	reg := newRegistry(t, nil,
		&tool.Tool{Name: "ok", Tier: tool.Read, Handler: noting(`caller "alice" by token_exchange`, false)},
		&tool.Tool{Name: "bad", Tier: tool.Read, Handler: noting(tool.UpstreamShared, true)},
		&tool.Tool{Name: "plain", Tier: tool.Read, Handler: okHandler},
	)
	ex, mem := newAuditedExecutor(reg, false)
	ex.Run(context.Background(), []tool.Call{{Name: "ok"}, {Name: "bad"}, {Name: "plain"}})
	want := map[int]string{0: `caller "alice" by token_exchange`, 1: tool.UpstreamShared, 2: ""}
	outcomes := 0
	for _, ev := range mem.Events() {
		switch ev.Kind {
		case audit.CallExecuted, audit.CallErrored:
			outcomes++
			if ev.UpstreamIdentity != want[ev.Index] {
				t.Errorf("call %d (%s): upstream identity %q, want %q", ev.Index, ev.Kind, ev.UpstreamIdentity, want[ev.Index])
			}
		default:
			if ev.UpstreamIdentity != "" {
				t.Errorf("event %s of call %d names an upstream identity %q: only outcomes do", ev.Kind, ev.Index, ev.UpstreamIdentity)
			}
		}
	}
	if outcomes != 3 {
		t.Errorf("%d outcome events, want 3", outcomes)
	}
	// Outside an executor's call a note goes nowhere, and does not panic.
	tool.NoteUpstreamIdentity(context.Background(), "nobody")
}

// A handler's AuthorizationError becomes a result that says so, with the
// URL beside the message for the caller alone: not in the message, not in
// the result's JSON, not in the audit log, even with arguments logged.
func TestAuthorizationErrorResult(t *testing.T) {
	t.Parallel()
	const url = "https://as.example.com/authorize?client_id=gw&state=secret-state"
	exp := time.Now().Add(15 * time.Minute)
	h := func(context.Context, json.RawMessage) (*tool.Result, error) {
		return nil, fmt.Errorf("server %q: %w", "wiki", &tool.AuthorizationError{
			Authorization: tool.Authorization{URL: url, ID: "auth-1", Expires: exp, Source: "wiki"},
			Err:           errors.New("caller alice must authorize"),
		})
	}
	reg := newRegistry(t, nil, &tool.Tool{Name: "wiki__read", Tier: tool.Read, Handler: h})
	ex, mem := newAuditedExecutor(reg, true)
	res := ex.Call(context.Background(), "wiki__read", nil)
	wantError(t, res, tool.ReasonAuthorization)
	if a := res.Authorization; a == nil || a.URL != url || a.ID != "auth-1" || !a.Expires.Equal(exp) || a.Source != "wiki" {
		t.Fatalf("Authorization = %+v, want the URL, ID, expiry and source", res.Authorization)
	}
	raw, _ := json.Marshal(res)
	logged, _ := json.Marshal(mem.Events())
	for what, s := range map[string]string{"message": res.Message, "text": res.Text(), "JSON": string(raw), "audit": string(logged), "%v": fmt.Sprintf("%v %+v", res, res)} {
		if strings.Contains(s, "secret-state") {
			t.Errorf("the authorization URL is in the result's %s: %s", what, s)
		}
	}
	if !strings.Contains(res.Message, "caller alice must authorize") {
		t.Errorf("message %q does not say why", res.Message)
	}
	// Masking keeps it.
	if m := res.Masked(audit.NewSecrets("caller alice must authorize")); m.Authorization == nil || m.Authorization.URL != url {
		t.Errorf("a masked result lost its authorization: %+v", m.Authorization)
	}
}
