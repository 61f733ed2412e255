package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

// FuzzCallArgs feeds arbitrary argument bytes through the exported API to a
// tool that accepts any object. Whatever the bytes, the call must return a
// result without panicking; a JSON object (or nothing, or null) must reach
// the handler as a re-encoded JSON object; anything else must be refused as
// invalid arguments without reaching it.
func FuzzCallArgs(f *testing.F) {
	for _, seed := range []string{
		``, `null`, ` null `, `{}`, `{"a":1}`, `{"a":1,"a":2}`, `{} {}`, `{}x`, `[1]`, `"x"`, `1e999`,
		`{"n":12345678901234567890}`, `{"s":"\ud800"}`, "{\"s\":\"\xff\"}", `{"a":{"b":[{"c":null}]}}`,
		`{`, `}`, `nul`, `{"a":1}]`, "\ufeff{}", `{"":true}`, `{"a":-0.0e-0}`,
	} {
		f.Add([]byte(seed))
	}
	var got []json.RawMessage
	ex := tool.NewExecutor(tool.NewRegistry(nil), nil)
	if err := ex.Registry().Register(&tool.Tool{Name: "any", Tier: tool.Read,
		Handler: func(_ context.Context, args json.RawMessage) (*tool.Result, error) {
			got = append(got, append(json.RawMessage(nil), args...))
			return tool.TextResult("ran"), nil
		}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		got = got[:0]
		res := ex.Call(context.Background(), "any", json.RawMessage(args))
		if res == nil {
			t.Fatal("Call returned a nil result")
		}
		trimmed := bytes.TrimSpace(args)
		isObject := json.Valid(trimmed) && len(trimmed) > 0 && trimmed[0] == '{'
		noArgs := len(trimmed) == 0 || string(trimmed) == "null"
		if isObject || noArgs {
			if res.IsError {
				t.Fatalf("valid object %q refused: %s: %s", args, res.Reason, res.Message)
			}
			if len(got) != 1 {
				t.Fatalf("handler called %d times for %q, want 1", len(got), args)
			}
			var obj map[string]any
			if err := json.Unmarshal(got[0], &obj); err != nil || obj == nil {
				t.Fatalf("handler got %q for %q, not a JSON object: %v", got[0], args, err)
			}
			return
		}
		if !res.IsError || res.Reason != tool.ReasonInvalidArgs || res.Message == "" {
			t.Fatalf("non-object %q: result %+v, want invalid_arguments", args, res)
		}
		if len(got) != 0 {
			t.Fatalf("handler called for non-object %q", args)
		}
	})
}
