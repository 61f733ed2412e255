package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

const planted = "sk-planted-0123456789"

// relay records what reaches the caller during a call; it is a Caller, a
// LogReceiver and an Asker.
type relay struct {
	mu       sync.Mutex
	progress []string
	logs     []string
	asked    []string
}

func (r *relay) Progress(_ context.Context, p tool.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = append(r.progress, p.Message)
}

func (r *relay) Log(_ context.Context, m tool.LogMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, string(m.Data))
}

func (r *relay) Ask(_ context.Context, _ tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, string(params))
	return json.RawMessage(`{"action":"accept"}`), nil
}

// leaky is a tool that echoes the planted secret everywhere it can: to
// the caller while it runs, and in every part of its result.
func leaky(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
	c := tool.CallerFrom(ctx)
	c.Progress(ctx, tool.Progress{Progress: 1, Message: "using " + planted})
	if l, ok := c.(tool.LogReceiver); ok {
		l.Log(ctx, tool.LogMessage{Level: "info", Data: json.RawMessage(`{"key":"` + planted + `"}`)})
	}
	if a, ok := c.(tool.Asker); ok {
		if _, err := a.Ask(ctx, tool.Elicitation, json.RawMessage(`{"message":"confirm `+planted+`?"}`)); err != nil {
			return nil, err
		}
	}
	return &tool.Result{
		Content: []tool.Content{
			&tool.Text{Text: "the key is " + planted},
			&tool.Resource{URI: "file:///" + planted, Text: planted},
			&tool.ResourceLink{URI: "https://x.example/?k=" + planted, Name: planted},
		},
		Structured: map[string]any{"key": planted, "n": 1},
	}, nil
}

func TestExecutorMaskMasksResultsAndWhatReachesTheCaller(t *testing.T) {
	for _, observed := range []bool{false, true} {
		t.Run(fmt.Sprintf("observer=%v", observed), func(t *testing.T) { testExecutorMask(t, observed) })
	}
}

// passObserver is an Observer that gives each call a context of its own, as
// a tracer does.
type passObserver struct{}

type passKey struct{}

func (passObserver) CallStarted(ctx context.Context, ev audit.Event) context.Context {
	return context.WithValue(ctx, passKey{}, ev.Index)
}
func (passObserver) Step(context.Context, audit.Event) {}

func testExecutorMask(t *testing.T, observed bool) {
	reg := newRegistry(t, nil,
		&tool.Tool{Name: "leaky", Tier: tool.Read, Handler: leaky},
		&tool.Tool{Name: "fails", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			return nil, errors.New("denied for " + planted)
		}},
		&tool.Tool{Name: "refuses", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			return &tool.Result{IsError: true, Content: []tool.Content{&tool.Text{Text: "bad key " + planted}}}, nil
		}})
	opts := &tool.ExecutorOptions{Mask: audit.NewSecrets(planted)}
	if observed {
		opts.Observer = passObserver{}
	}
	ex := tool.NewExecutor(reg, opts)
	r := &relay{}
	results := ex.Run(tool.WithCaller(context.Background(), r), []tool.Call{{Name: "leaky"}, {Name: "fails"}, {Name: "refuses"}})
	wantError(t, results[1], tool.ReasonFailed)
	wantError(t, results[2], tool.ReasonTool)
	for i, res := range results {
		raw, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), planted) || !strings.Contains(string(raw), audit.Mask) {
			t.Errorf("result %d = %s, want the secret masked", i, raw)
		}
	}
	if got := results[0].Structured.(map[string]any); got["key"] != audit.Mask || got["n"] != json.Number("1") {
		t.Errorf("structured value = %v, want the key masked and n kept", got)
	}
	relayed := strings.Join(append(append(r.progress, r.logs...), r.asked...), "\n")
	if len(r.progress) != 1 || len(r.logs) != 1 || len(r.asked) != 1 || strings.Contains(relayed, planted) {
		t.Errorf("the caller received:\n%s\nwant one progress, log and request each, masked", relayed)
	}
}

// TestExecutorWithoutMaskReturnsTheToolsOwnResult is how a library caller
// gets the raw result, and masks it itself when it wants to.
func TestExecutorWithoutMaskReturnsTheToolsOwnResult(t *testing.T) {
	ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "leaky", Tier: tool.Read, Handler: leaky}), nil)
	r := &relay{}
	res := ex.Run(tool.WithCaller(context.Background(), r), []tool.Call{{Name: "leaky"}})[0]
	if !strings.Contains(res.Text(), planted) || !strings.Contains(r.progress[0], planted) {
		t.Fatalf("without Mask the result and the relay must be the tool's own: %q, %q", res.Text(), r.progress)
	}
	masked := res.Masked(audit.NewSecrets(planted))
	if strings.Contains(masked.Text(), planted) || !strings.Contains(res.Text(), planted) {
		t.Errorf("Masked: %q (original now %q); want a masked copy, the original untouched", masked.Text(), res.Text())
	}
}

func TestResultMaskedWithNoSecretIsTheSameResult(t *testing.T) {
	res := &tool.Result{Content: []tool.Content{&tool.Text{Text: "s x rv x r"}}, Structured: map[string]any{"a": "b"}, Message: "m"}
	for _, s := range []*audit.Secrets{nil, audit.NewSecrets(), audit.NewSecrets("x", "e"), audit.NewSecrets(planted)} {
		if got := res.Masked(s); got != res {
			t.Errorf("Masked returned a new result %+v though nothing needed masking", got)
		}
	}
}

// failingSink fails the writes of the kinds in fail.
type failingSink struct {
	audit.Memory
	fail map[audit.Kind]bool
}

func (f *failingSink) Write(ev *audit.Event) error {
	if f.fail[ev.Kind] {
		return errors.New("disk full")
	}
	return f.Memory.Write(ev)
}

// TestRequiredAuditRefusesCallsItCannotRecord: a call whose events up to
// its start cannot be written does not run, and says why; without
// Required the same call runs.
func TestRequiredAuditRefusesCallsItCannotRecord(t *testing.T) {
	for _, kind := range []audit.Kind{audit.CallRequested, audit.ValidationPassed, audit.ConfirmationRequested, audit.ConfirmationAccepted} {
		for _, required := range []bool{true, false} {
			ran := false
			conf := &confirmRecorder{answer: true}
			reg := newRegistry(t, conf, &tool.Tool{Name: "w", Tier: tool.Write, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
				ran = true
				return tool.TextResult("ok"), nil
			}})
			logger, _ := quietLogger()
			sink := &failingSink{fail: map[audit.Kind]bool{kind: true}}
			ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: audit.NewLog(sink, &audit.LogOptions{Logger: logger, Required: required}), Logger: logger})
			res := ex.Call(context.Background(), "w", nil)
			if !required {
				if !ran || res.IsError {
					t.Errorf("audit not required, %s unwritable: ran=%v result %+v, want the call run", kind, ran, res)
				}
				continue
			}
			wantError(t, res, tool.ReasonAuditFailed)
			if ran || !strings.Contains(res.Message, "audit log is required") || !strings.Contains(res.Message, "disk full") {
				t.Errorf("%s unwritable: ran=%v message %q, want the call refused saying why", kind, ran, res.Message)
			}
			if asked := len(conf.seen()); kind != audit.ConfirmationAccepted && asked != 0 {
				t.Errorf("%s unwritable: the confirmer was asked %d times", kind, asked)
			}
		}
	}
}

func TestResultMaskedCostsNothingWithoutASecret(t *testing.T) {
	res := &tool.Result{Content: []tool.Content{&tool.Text{Text: "plain"}, &tool.Resource{URI: "file:///a", Text: "b"}}, Message: "m"}
	s := audit.NewSecrets(planted)
	if n := testing.AllocsPerRun(100, func() { _ = res.Masked(s) }); n != 0 {
		t.Errorf("Masked of a result holding no secret allocates %v times", n)
	}
}

// BenchmarkResultMasked is the executor's cost per result with secrets
// configured: a 4 KiB text holding none, and one holding one.
func BenchmarkResultMasked(b *testing.B) {
	s := audit.NewSecrets(planted, "another-secret-value", "ghp_0123456789abcdefghij")
	text := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 91)
	for name, res := range map[string]*tool.Result{
		"clean":  tool.TextResult(text),
		"leaked": tool.TextResult(text + planted),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = res.Masked(s)
			}
		})
	}
}
