package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// spin returns once the monotonic clock has visibly advanced, so a step
// that calls it is guaranteed a non-zero measured duration without sleeping.
func spin() {
	start := time.Now()
	for time.Since(start) == 0 {
	}
}

func slowOK(context.Context, json.RawMessage) (*tool.Result, error) {
	spin()
	return tool.TextResult("ok"), nil
}

func TestAuditEventSequencePerOutcome(t *testing.T) {
	var (
		R  = audit.CallRequested
		VP = audit.ValidationPassed
		VF = audit.ValidationFailed
		CQ = audit.ConfirmationRequested
		CA = audit.ConfirmationAccepted
		CR = audit.ConfirmationRejected
		EX = audit.CallExecuted
		ER = audit.CallErrored
	)
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	failing := func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, errors.New("disk on fire") }
	tests := []struct {
		name       string
		tool       *tool.Tool
		answer     bool
		call, args string
		want       []audit.Kind
		reason     string // Reason of the last event
	}{
		{"read call", &tool.Tool{Name: "r", Tier: tool.Read, Handler: okHandler, InputSchema: schema},
			false, "r", `{"n":1}`, []audit.Kind{R, VP, EX}, ""},
		{"confirmed write", &tool.Tool{Name: "w", Tier: tool.Write, Handler: okHandler},
			true, "w", `{}`, []audit.Kind{R, VP, CQ, CA, EX}, ""},
		{"rejected destructive", &tool.Tool{Name: "d", Tier: tool.Destructive, Handler: okHandler},
			false, "d", `{}`, []audit.Kind{R, VP, CQ, CR}, string(tool.ReasonDeclined)},
		{"unknown tool", &tool.Tool{Name: "r", Tier: tool.Read, Handler: okHandler},
			false, "ghost", `{}`, []audit.Kind{R, VF}, string(tool.ReasonUnknownTool)},
		{"invalid args", &tool.Tool{Name: "r", Tier: tool.Read, Handler: okHandler, InputSchema: schema},
			false, "r", `{"n":"x"}`, []audit.Kind{R, VF}, string(tool.ReasonInvalidArgs)},
		{"malformed args", &tool.Tool{Name: "r", Tier: tool.Read, Handler: okHandler},
			false, "r", `{`, []audit.Kind{R, VF}, string(tool.ReasonInvalidArgs)},
		{"handler error", &tool.Tool{Name: "f", Tier: tool.Read, Handler: failing},
			false, "f", `{}`, []audit.Kind{R, VP, ER}, string(tool.ReasonFailed)},
		{"handler error after confirmation", &tool.Tool{Name: "f", Tier: tool.Write, Handler: failing},
			true, "f", `{}`, []audit.Kind{R, VP, CQ, CA, ER}, string(tool.ReasonFailed)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newRegistry(t, &confirmRecorder{answer: tt.answer}, tt.tool)
			ex, mem := newAuditedExecutor(reg, false)
			res := ex.Call(context.Background(), tt.call, json.RawMessage(tt.args))
			evs := mem.Events()
			if got := kinds(evs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("kinds = %v, want %v", got, tt.want)
			}
			last := evs[len(evs)-1]
			if last.Reason != tt.reason {
				t.Errorf("last event reason = %q, want %q", last.Reason, tt.reason)
			}
			if tt.reason != "" && last.Error != res.Message {
				t.Errorf("last event error = %q, want the result message %q", last.Error, res.Message)
			}
			for _, ev := range evs {
				if ev.Tool != tt.call || ev.Index != 0 || ev.Batch == "" || ev.Time.IsZero() {
					t.Errorf("event %s: Tool=%q Index=%d Batch=%q Time=%v", ev.Kind, ev.Tool, ev.Index, ev.Batch, ev.Time)
				}
			}
		})
	}
}

func TestAuditCancelledBeforeRunIsOneErroredEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ex, mem := newAuditedExecutor(newRegistry(t, nil, readTool("r")), false)
	ex.Call(ctx, "r", nil)
	evs := mem.Events()
	want := []audit.Kind{audit.CallRequested, audit.ValidationPassed, audit.CallErrored}
	if got := kinds(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("kinds = %v, want %v", got, want)
	}
	if evs[2].Reason != string(tool.ReasonCancelled) {
		t.Errorf("errored reason = %q, want cancelled", evs[2].Reason)
	}
}

// outcomeSink is a Memory that closes done once it holds the outcome of
// every call in want.
type outcomeSink struct {
	audit.Memory
	mu   sync.Mutex
	want map[int]bool
	done chan struct{}
}

func (o *outcomeSink) Write(ev *audit.Event) error {
	if err := o.Memory.Write(ev); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.Kind.Ends() && o.want[ev.Index] {
		delete(o.want, ev.Index)
		if len(o.want) == 0 {
			close(o.done)
		}
	}
	return nil
}

// TestAuditEventIsWrittenWhenItsStepHappens: call 0 of a batch runs until
// the outcomes of calls 1 and 2 are in the sink, which a log holding later
// calls' events until earlier calls end would never let happen. The batch's
// order stays in the events: one batch id, each call's index and id, and
// each call's steps in order.
func TestAuditEventIsWrittenWhenItsStepHappens(t *testing.T) {
	ctx := testContext(t)
	sink := &outcomeSink{want: map[int]bool{1: true, 2: true}, done: make(chan struct{})}
	reg := newRegistry(t, &confirmRecorder{answer: true},
		&tool.Tool{Name: "c0", Tier: tool.Write, Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			if !wait(ctx, sink.done) {
				return nil, errors.New("the outcomes of calls 1 and 2 never reached the sink while call 0 ran")
			}
			return tool.TextResult("zero"), nil
		}},
		readTool("c1"),
		&tool.Tool{Name: "c2", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			return &tool.Result{IsError: true, Content: []tool.Content{&tool.Text{Text: "two failed"}}}, nil
		}},
	)
	logger, _ := quietLogger()
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: audit.NewLog(sink, &audit.LogOptions{Logger: logger}), Logger: logger})
	results := ex.Run(ctx, []tool.Call{{Name: "c0", ID: "id0"}, {Name: "c1", ID: "id1"}, {Name: "c2", ID: "id2"}})
	wantText(t, results[0], "zero")
	wantError(t, results[2], tool.ReasonTool)

	evs := sink.Events()
	if last := evs[len(evs)-1]; last.Index != 0 || last.Kind != audit.CallExecuted {
		t.Errorf("last event = %s of call %d, want call 0's call.executed", last.Kind, last.Index)
	}
	wantPerCall := [][]audit.Kind{
		{audit.CallRequested, audit.ValidationPassed, audit.ConfirmationRequested, audit.ConfirmationAccepted, audit.CallExecuted},
		{audit.CallRequested, audit.ValidationPassed, audit.CallExecuted},
		{audit.CallRequested, audit.ValidationPassed, audit.CallErrored},
	}
	perCall := make([][]audit.Kind, 3)
	for _, ev := range evs {
		if want := fmt.Sprintf("id%d", ev.Index); ev.Batch != evs[0].Batch || ev.CallID != want || ev.Tool != fmt.Sprintf("c%d", ev.Index) {
			t.Errorf("event %s of call %d: Batch=%q CallID=%q Tool=%q", ev.Kind, ev.Index, ev.Batch, ev.CallID, ev.Tool)
		}
		perCall[ev.Index] = append(perCall[ev.Index], ev.Kind)
	}
	if !reflect.DeepEqual(perCall, wantPerCall) {
		t.Errorf("per-call kinds = %v, want %v", perCall, wantPerCall)
	}
}

func TestAuditBatchIDSharedWithinBatchAndFreshPerBatch(t *testing.T) {
	ex, mem := newAuditedExecutor(newRegistry(t, nil, readTool("a"), readTool("b")), false)
	ex.Run(context.Background(), []tool.Call{{Name: "a"}, {Name: "b"}, {Name: "nope"}})
	first := mem.Events()
	ex.Run(context.Background(), []tool.Call{{Name: "a"}})
	second := mem.Events()[len(first):]
	if len(first) != 8 || len(second) != 3 {
		t.Fatalf("got %d and %d events, want 8 and 3", len(first), len(second))
	}
	id := first[0].Batch
	if len(id) != 16 {
		t.Errorf("batch id %q is not 16 hex digits", id)
	}
	for _, ev := range first {
		if ev.Batch != id {
			t.Errorf("event %s of call %d has batch %q, want %q", ev.Kind, ev.Index, ev.Batch, id)
		}
	}
	for _, ev := range second {
		if ev.Batch == id || ev.Batch != second[0].Batch {
			t.Errorf("second batch event %s has batch %q (first batch %q)", ev.Kind, ev.Batch, id)
		}
	}
}

func TestAuditRecordsSizesButNotContentByDefault(t *testing.T) {
	args := `{"password":"hunter2"}`
	ex, mem := newAuditedExecutor(newRegistry(t, nil, readTool("r")), false)
	res := ex.Call(context.Background(), "r", json.RawMessage(args))
	evs := mem.Events()
	if evs[0].Kind != audit.CallRequested || evs[0].ArgsBytes != len(args) {
		t.Errorf("requested event ArgsBytes = %d, want %d", evs[0].ArgsBytes, len(args))
	}
	last := evs[len(evs)-1]
	// Without argument logging the size is the content's own bytes (here
	// one text block), measured without encoding the result.
	if want := len(res.Text()); last.Kind != audit.CallExecuted || want == 0 || last.ResultBytes != want {
		t.Errorf("executed event ResultBytes = %d, want %d", last.ResultBytes, want)
	}
	for _, ev := range evs {
		if ev.Args != nil || ev.Result != nil {
			t.Errorf("event %s carries Args=%s Result=%s with LogArguments off", ev.Kind, ev.Args, ev.Result)
		}
	}
	all, _ := json.Marshal(evs)
	if bytes.Contains(all, []byte("hunter2")) {
		t.Errorf("argument value leaked into the audit trail: %s", all)
	}
}

// TestAuditWithLogArgumentsCarriesArgsAndResult: the arguments audited
// are the validated bytes the tool was given, not the caller's; refused
// arguments are audited as they came, since nothing ran.
func TestAuditWithLogArgumentsCarriesArgsAndResult(t *testing.T) {
	args := `{"q": "x", "q": "y"}` // the last duplicate wins, as the tool sees it
	var ran json.RawMessage
	echo := func(_ context.Context, a json.RawMessage) (*tool.Result, error) {
		ran = a
		return tool.TextResult("ok"), nil
	}
	failing := func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, errors.New("nope") }
	ex, mem := newAuditedExecutor(newRegistry(t, nil, &tool.Tool{Name: "r", Tier: tool.Read, Handler: echo},
		&tool.Tool{Name: "f", Tier: tool.Read, Handler: failing}), true)
	results := ex.Run(context.Background(), []tool.Call{{Name: "r", Args: json.RawMessage(args)}, {Name: "f"}, {Name: "r", Args: json.RawMessage(`[1]`)}})
	evs := byCall(mem.Events())
	if got := len(evs[0]) + len(evs[1]) + len(evs[2]); got != 8 {
		t.Fatalf("got %d events, want 8: %v", got, evs)
	}
	if string(ran) != `{"q":"y"}` {
		t.Fatalf("the tool ran with %s", ran)
	}
	requested, passed := evs[0][0], evs[0][1]
	if requested.Kind != audit.CallRequested || requested.Args != nil || requested.ArgsBytes != len(args) {
		t.Errorf("call.requested Args=%s ArgsBytes=%d, want no Args and the caller's size %d", requested.Args, requested.ArgsBytes, len(args))
	}
	if passed.Kind != audit.ValidationPassed || string(passed.Args) != string(ran) || passed.ArgsBytes != len(ran) {
		t.Errorf("validation.passed Args=%s ArgsBytes=%d, want the bytes that ran, %s", passed.Args, passed.ArgsBytes, ran)
	}
	if refused := evs[2][1]; refused.Kind != audit.ValidationFailed || string(refused.Args) != `[1]` {
		t.Errorf("validation.failed event %s Args=%s, want the refused bytes [1]", refused.Kind, refused.Args)
	}
	for i, ev := range []audit.Event{evs[0][2], evs[1][2]} {
		want, _ := json.Marshal(results[i])
		if ev.Kind != audit.CallExecuted && ev.Kind != audit.CallErrored {
			t.Fatalf("event %d is %s", i, ev.Kind)
		}
		if string(ev.Result) != string(want) || ev.ResultBytes != len(want) {
			t.Errorf("%s event Result=%s ResultBytes=%d, want %s", ev.Kind, ev.Result, ev.ResultBytes, want)
		}
	}
}

// byCall groups a batch's events by call index, in the order written.
func byCall(evs []audit.Event) map[int][]audit.Event {
	out := map[int][]audit.Event{}
	for _, ev := range evs {
		out[ev.Index] = append(out[ev.Index], ev)
	}
	return out
}

func TestAuditDurationsAndToolOrigin(t *testing.T) {
	conf := tool.ConfirmFunc(func(_ context.Context, pc tool.PendingCall) (bool, error) {
		spin()
		return pc.Name == "yes", nil
	})
	mk := func(name string) *tool.Tool {
		return &tool.Tool{Name: name, Tier: tool.Write, Handler: slowOK,
			Origin:      tool.Origin{Source: "srv", Name: "orig_" + name},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","pattern":"^x+$"}}}`)}
	}
	ex, mem := newAuditedExecutor(newRegistry(t, conf, mk("yes"), mk("no")), false)
	ex.Run(context.Background(), []tool.Call{{Name: "yes", Args: json.RawMessage(`{"a":"xxx"}`)}, {Name: "no"}})
	evs := mem.Events()
	timed := map[audit.Kind]bool{
		audit.ValidationPassed: true, audit.ConfirmationAccepted: true,
		audit.ConfirmationRejected: true, audit.CallExecuted: true,
	}
	seen := map[audit.Kind]bool{}
	for _, ev := range evs {
		seen[ev.Kind] = true
		if timed[ev.Kind] && ev.Duration <= 0 {
			t.Errorf("%s event of %s has duration %v, want > 0", ev.Kind, ev.Tool, ev.Duration)
		}
		if !timed[ev.Kind] && ev.Duration != 0 {
			t.Errorf("%s event has duration %v; it is not a timed step", ev.Kind, ev.Duration)
		}
		if ev.Tier != "write" || ev.Source != "srv" || ev.Original != "orig_"+ev.Tool {
			t.Errorf("%s event of %s: Tier=%q Source=%q Original=%q", ev.Kind, ev.Tool, ev.Tier, ev.Source, ev.Original)
		}
	}
	for k := range timed {
		if !seen[k] {
			t.Errorf("no %s event was recorded", k)
		}
	}
}

func TestAuditUnknownToolHasNoTierOrOrigin(t *testing.T) {
	ex, mem := newAuditedExecutor(newRegistry(t, nil, readTool("r")), false)
	ex.Call(context.Background(), "ghost", nil)
	for _, ev := range mem.Events() {
		if ev.Tier != "" || ev.Source != "" || ev.Original != "" || ev.Tool != "ghost" {
			t.Errorf("%s: Tool=%q Tier=%q Source=%q Original=%q", ev.Kind, ev.Tool, ev.Tier, ev.Source, ev.Original)
		}
	}
}

func TestAuditFailedRedactionStoresOnlyOpaqueEvents(t *testing.T) {
	const secret = "sk-PLANTED-SECRET-42"
	redactors := map[string]audit.Redactor{
		"error": audit.RedactorFunc(func(ev *audit.Event) error {
			return fmt.Errorf("cannot redact %s", ev.Args)
		}),
		"panic": audit.RedactorFunc(func(ev *audit.Event) error {
			ev.Tool = "half-edited"
			panic("redactor bug")
		}),
	}
	for name, red := range redactors {
		t.Run(name, func(t *testing.T) {
			var sink bytes.Buffer
			mem := &audit.Memory{}
			logger, _ := quietLogger()
			log := audit.NewLog(teeSink{mem, audit.WriterSink{W: &sink}}, &audit.LogOptions{Redactor: red, Logger: logger})
			reg := newRegistry(t, &confirmRecorder{answer: false},
				&tool.Tool{Name: "r", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
					return tool.TextResult("echo " + secret), nil
				}},
				&tool.Tool{Name: "d", Tier: tool.Destructive, Handler: okHandler, Origin: tool.Origin{Source: "s", Name: "o"}})
			ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log, LogArguments: true, Logger: logger})
			args := json.RawMessage(`{"token":"` + secret + `"}`)
			ex.Run(context.Background(), []tool.Call{
				{Name: "r", ID: secret, Args: args},
				{Name: "d", Args: args},
				{Name: "bad", Args: json.RawMessage(`{"x":"` + secret)},
			})
			evs := mem.Events()
			if len(evs) != 3+4+2 {
				t.Fatalf("sink got %d events, want 9 (one per step)", len(evs))
			}
			for i, ev := range evs {
				if ev.Kind != audit.RedactionFailed {
					t.Errorf("event %d has kind %s, want %s", i, ev.Kind, audit.RedactionFailed)
				}
				if ev.Tool != "" || ev.Args != nil || ev.Result != nil || ev.Error != "" || ev.CallID != "" ||
					ev.Reason != "" || ev.Source != "" || ev.Original != "" || ev.Tier != "" || ev.ArgsBytes != 0 || ev.ResultBytes != 0 {
					t.Errorf("opaque event %d carries content: %+v", i, ev)
				}
				if ev.Batch == "" || ev.Batch != evs[0].Batch || ev.Time.IsZero() {
					t.Errorf("opaque event %d lost its place: Batch=%q Time=%v", i, ev.Batch, ev.Time)
				}
			}
			var idx []int
			for _, ev := range evs {
				idx = append(idx, ev.Index)
			}
			slices.Sort(idx)
			if fmt.Sprint(idx) != "[0 0 0 1 1 1 1 2 2]" {
				t.Errorf("opaque event indexes = %v, want [0 0 0 1 1 1 1 2 2]", idx)
			}
			if strings.Contains(sink.String(), secret) || strings.Contains(sink.String(), "half-edited") {
				t.Errorf("sink output leaks event content:\n%s", sink.String())
			}
			if n := strings.Count(sink.String(), "\n"); n != 9 {
				t.Errorf("sink has %d lines, want 9", n)
			}
		})
	}
}

// teeSink writes every event to each of its sinks.
type teeSink []audit.Sink

func (ts teeSink) Write(ev *audit.Event) error {
	for _, s := range ts {
		if err := s.Write(ev); err != nil {
			return err
		}
	}
	return nil
}

func TestAuditSecretsRedactorMasksArgsAndResultsThroughExecutor(t *testing.T) {
	const secret = "tok_abc123"
	mem := &audit.Memory{}
	log := audit.NewLog(mem, &audit.LogOptions{Redactor: audit.NewSecrets(secret)})
	reg := newRegistry(t, nil, &tool.Tool{Name: "r", Tier: tool.Read, Handler: func(_ context.Context, args json.RawMessage) (*tool.Result, error) {
		return tool.TextResult("got " + string(args)), nil
	}})
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log, LogArguments: true})
	res := ex.Call(context.Background(), "r", json.RawMessage(`{"t":"`+secret+`"}`))
	if !strings.Contains(res.Text(), secret) {
		t.Fatalf("the caller's own result must not be redacted: %q", res.Text())
	}
	all, err := json.Marshal(mem.Events())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(all, []byte(secret)) {
		t.Errorf("secret reached the sink: %s", all)
	}
	if c := bytes.Count(all, []byte(audit.Mask)); c < 2 {
		t.Errorf("want the mask in both args and result, found %d masks: %s", c, all)
	}
}

func TestAuditSecretWithHTMLCharactersIsMaskedInLoggedResult(t *testing.T) {
	const secret = "p&ss<word>"
	mem := &audit.Memory{}
	log := audit.NewLog(mem, &audit.LogOptions{Redactor: audit.NewSecrets(secret)})
	reg := newRegistry(t, nil, &tool.Tool{Name: "r", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
		return tool.TextResult("the password is " + secret), nil
	}})
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log, LogArguments: true})
	ex.Call(context.Background(), "r", nil)
	for _, ev := range mem.Events() {
		if ev.Result == nil {
			continue
		}
		var decoded struct {
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal(ev.Result, &decoded); err != nil {
			t.Fatal(err)
		}
		for _, c := range decoded.Content {
			if strings.Contains(c.Text, secret) {
				t.Errorf("stored result decodes to %q, which contains the secret (raw %s)", c.Text, ev.Result)
			}
		}
	}
}
