package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// What crosses between a parked call's holder and its client's requests
// survives JSON, so that a Parking may keep it outside the process (a
// fleet's shared store).
func TestParkingStepsAndNotesAreSerialisable(t *testing.T) {
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}, IsError: true}
	for _, v := range []any{
		Step{Round: 2, Question: &Question{Kind: tool.Elicitation, Params: json.RawMessage(`{"message":"Allow this call?"}`)}},
		Step{Result: result},
		Note{Progress: &tool.Progress{Progress: 1, Total: 3, Message: "one"}},
		Note{Log: &tool.LogMessage{Level: "info", Logger: "up", Data: json.RawMessage(`"line"`)}},
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%+v: %v", v, err)
		}
		back := reflect.New(reflect.TypeOf(v))
		if err := json.Unmarshal(raw, back.Interface()); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		again, _ := json.Marshal(back.Elem().Interface())
		if !bytes.Equal(raw, again) {
			t.Errorf("%T does not survive JSON: %s became %s", v, raw, again)
		}
	}
	raw, _ := json.Marshal(Step{Result: result})
	var back Step
	if err := json.Unmarshal(raw, &back); err != nil || back.Result == nil || !back.Result.IsError || back.Result.Content[0].(*mcp.TextContent).Text != "done" {
		t.Errorf("a result through a step's JSON: %v %+v", err, back.Result)
	}
}

// The local Parking's rounds: a question is answered once, by the round
// that asked it; a replayed or early answer is refused; notes that came
// while nobody waited reach the next request, in order; the result is
// taken once.
func TestLocalParkingRounds(t *testing.T) {
	p := NewLocalParking(time.Minute)
	ctx := ctxT(t)
	var cancelled []error
	h, err := p.Park(ctx, "call-1", func(cause error) { cancelled = append(cancelled, cause) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Park(ctx, "call-1", nil); err == nil {
		t.Error("a second call under the same id was parked")
	}
	answers := make(chan json.RawMessage, 2)
	go func() {
		h.Note(Note{Progress: &tool.Progress{Progress: 1}})
		a, _ := h.Ask(ctx, Question{Kind: tool.Elicitation, Params: json.RawMessage(`{"n":1}`)})
		answers <- a
		h.Note(Note{Progress: &tool.Progress{Progress: 2}})
		h.Note(Note{Progress: &tool.Progress{Progress: 3}})
		a, _ = h.Ask(ctx, Question{Kind: tool.Sampling, Params: json.RawMessage(`{"n":2}`)})
		answers <- a
		h.Finish(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "end"}}})
	}()
	var notes []float64
	note := func(n Note) { notes = append(notes, n.Progress.Progress) }

	step, err := p.Resume(ctx, "call-1", 0, nil, note)
	if err != nil || step.Round != 1 || step.Question == nil || string(step.Question.Params) != `{"n":1}` {
		t.Fatalf("first step: %+v %v", step, err)
	}
	if _, err := p.Resume(ctx, "call-1", 2, json.RawMessage(`"early"`), note); !errors.Is(err, ErrRoundAnswered) {
		t.Errorf("an answer to a round not asked yet: %v", err)
	}
	step, err = p.Resume(ctx, "call-1", 1, json.RawMessage(`"first"`), note)
	if err != nil || step.Round != 2 || step.Question.Kind != tool.Sampling {
		t.Fatalf("second step: %+v %v", step, err)
	}
	if a := <-answers; string(a) != `"first"` {
		t.Errorf("the holder got %s", a)
	}
	if _, err := p.Resume(ctx, "call-1", 1, json.RawMessage(`"again"`), note); !errors.Is(err, ErrRoundAnswered) {
		t.Errorf("a replayed answer: %v", err)
	}
	step, err = p.Resume(ctx, "call-1", 2, json.RawMessage(`"second"`), note)
	if err != nil || step.Result == nil || text(step.Result) != "end" {
		t.Fatalf("last step: %+v %v", step, err)
	}
	if a := <-answers; string(a) != `"second"` {
		t.Errorf("the holder got %s", a)
	}
	if !reflect.DeepEqual(notes, []float64{1, 2, 3}) {
		t.Errorf("notes %v, want 1, 2, 3 in order", notes)
	}
	if _, err := p.Resume(ctx, "call-1", 2, nil, note); !errors.Is(err, ErrNotParked) {
		t.Errorf("resuming a call whose result was taken: %v", err)
	}
	if err := p.Cancel(ctx, "call-1", "late"); !errors.Is(err, ErrNotParked) || len(cancelled) != 0 {
		t.Errorf("cancelling an ended call: %v, cancel called %d times", err, len(cancelled))
	}
	// Nothing holds the call once its result was taken: a timer left
	// to drop it after keep held every call's result that long (ten
	// minutes by default), and a busy gateway's heap with them.
	if h.(*localCall).expiry.Stop() {
		t.Error("the timer that drops an untaken result still runs after the result was taken")
	}
}

// A request that waits on a parked call and goes away leaves it parked;
// Cancel reaches the holder once.
func TestLocalParkingCancel(t *testing.T) {
	p := NewLocalParking(time.Minute)
	var causes []string
	if _, err := p.Park(ctxT(t), "c", func(cause error) { causes = append(causes, cause.Error()) }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := p.Resume(ctx, "c", 0, nil, func(Note) {}); !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose context ended: %v", err)
	}
	for range 2 {
		if err := p.Cancel(ctxT(t), "c", "the client went away"); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(causes, []string{"the client went away"}) {
		t.Errorf("the holder was cancelled with %q, want once", causes)
	}
}

// holdingRelay is a Relay of one replica: it holds nothing elsewhere,
// reaches no other replica, and counts the holds taken and released.
type holdingRelay struct{ held, released atomic.Int32 }

func (*holdingRelay) Instance() string { return "only" }
func (r *holdingRelay) Hold(context.Context, string, string, time.Duration) (func(), error) {
	r.held.Add(1)
	return func() { r.released.Add(1) }, nil
}
func (*holdingRelay) Holder(context.Context, string, string) (string, error) { return "", nil }
func (*holdingRelay) Call(context.Context, string, string, []byte, func([]byte)) ([]byte, error) {
	return nil, errors.New("no other replica")
}
func (*holdingRelay) Handle(string, func(context.Context, []byte, func([]byte)) ([]byte, error)) func() {
	return func() {}
}

// TestARelayedCallLeavesNothingHeld: a fleet's parked call that never
// asked its client anything holds nothing on the relay, and its Finish
// leaves no timer behind (one per call, each holding the call and its
// result for twice the park timeout, grew a busy gateway's heap with its
// calls: docs/performance.md). A call that asked has its hold released
// when its result is taken, or by a timer that keeps the call's id only;
// and a hold taken as the call ends is released at once.
func TestARelayedCallLeavesNothingHeld(t *testing.T) {
	ctx := ctxT(t)
	for _, ask := range []bool{false, true} {
		relay := &holdingRelay{}
		p := newRelayedParking(NewLocalParking(time.Hour), relay, time.Hour)
		h, err := p.Park(ctx, "call-1", func(error) {})
		if err != nil {
			t.Fatal(err)
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "end"}}}
		round := 0
		finished := make(chan struct{})
		if ask {
			go func() {
				defer close(finished)
				_, _ = h.Ask(ctx, Question{Kind: tool.Elicitation, Params: json.RawMessage(`{}`)})
				h.Finish(res)
			}()
			step, err := p.Resume(ctx, "call-1", 0, nil, func(Note) {})
			if err != nil || step.Question == nil {
				t.Fatalf("the question: %+v %v", step, err)
			}
			round = step.Round
		} else {
			h.Finish(res)
			close(finished)
		}
		step, err := p.Resume(ctx, "call-1", round, json.RawMessage(`"yes"`), func(Note) {})
		if err != nil || step.Result != res {
			t.Fatalf("asked %v: the result: %+v %v", ask, step, err)
		}
		<-finished
		p.mu.Lock()
		dropHold, kept := h.(*relayedHolder).dropHold, len(p.release)
		p.mu.Unlock()
		switch held, released := relay.held.Load(), relay.released.Load(); {
		case !ask && (held != 0 || dropHold != nil):
			t.Errorf("a call that asked nothing: %d holds taken, a timer left %v", held, dropHold != nil)
		case ask && (held != 1 || released != 1 && dropHold == nil):
			t.Errorf("a call that asked: %d holds taken, %d released, a timer to release it %v", held, released, dropHold != nil)
		case kept != 0:
			t.Errorf("asked %v: %d holds kept after the result was taken", ask, kept)
		}
	}
	// A hold taken after its call ended is released at once.
	relay := &holdingRelay{}
	p := newRelayedParking(NewLocalParking(time.Hour), relay, time.Hour)
	h, err := p.Park(ctx, "call-2", func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	h.Finish(&mcp.CallToolResult{})
	askCtx, cancel := context.WithCancel(ctx)
	cancel() // the late question is not waited for
	_, _ = h.Ask(askCtx, Question{Kind: tool.Elicitation, Params: json.RawMessage(`{}`)})
	p.mu.Lock()
	kept := len(p.release)
	p.mu.Unlock()
	if held, released := relay.held.Load(), relay.released.Load(); held != 1 || released != 1 || kept != 0 {
		t.Errorf("a hold taken after the call ended: %d taken, %d released, %d kept", held, released, kept)
	}
}
