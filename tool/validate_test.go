package tool_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

// schemaTool registers one read tool with schema and returns an executor
// over it and the recorder behind its handler.
func schemaTool(t *testing.T, schema string) (*tool.Executor, *recorder) {
	t.Helper()
	rec := &recorder{}
	tl := &tool.Tool{Name: "t", Tier: tool.Read, Handler: rec.handle}
	if schema != "" {
		tl.InputSchema = json.RawMessage(schema)
	}
	return tool.NewExecutor(newRegistry(t, nil, tl), nil), rec
}

func TestCallUnknownToolNeverReachesAnyHandler(t *testing.T) {
	ex, rec := schemaTool(t, "")
	res := ex.Call(context.Background(), "nope", json.RawMessage(`{}`))
	wantError(t, res, tool.ReasonUnknownTool)
	if !strings.Contains(res.Message, `"nope"`) {
		t.Errorf("message %q does not name the tool", res.Message)
	}
	if rec.calls() != 0 {
		t.Errorf("a handler was called %d times", rec.calls())
	}
}

func TestCallRejectsArgumentsThatAreNotOneJSONObject(t *testing.T) {
	tests := []struct {
		name, args, mention string
	}{
		{"malformed", `{"a":`, "not valid JSON"},
		{"garbage", `hello`, "not valid JSON"},
		{"trailing object", `{} {}`, "data after the value"},
		{"trailing garbage", `{"a":1} x`, "not valid JSON"},
		{"trailing bracket", `{"a":1}]`, "not valid JSON"},
		{"array", `[1]`, "not an array"},
		{"string", `"x"`, "not a string"},
		{"number", `42`, "not a number"},
		{"boolean", `true`, "not a boolean"},
	}
	ex, rec := schemaTool(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ex.Call(context.Background(), "t", json.RawMessage(tt.args))
			wantError(t, res, tool.ReasonInvalidArgs)
			if !strings.Contains(res.Message, tt.mention) {
				t.Errorf("message %q does not mention %q", res.Message, tt.mention)
			}
			if len(res.Violations) != 1 || res.Violations[0].Path != "" {
				t.Errorf("violations = %+v, want one at the root", res.Violations)
			}
		})
	}
	if rec.calls() != 0 {
		t.Errorf("handler called %d times for invalid arguments", rec.calls())
	}
}

func TestCallTreatsEmptyAndNullArgumentsAsEmptyObject(t *testing.T) {
	ex, rec := schemaTool(t, `{"type":"object","properties":{"a":{"type":"string"}}}`)
	for _, args := range []string{"", "null", "  null\n", " \t\n"} {
		wantText(t, ex.Call(context.Background(), "t", json.RawMessage(args)), "ok")
		if got := string(rec.last(t)); got != `{}` {
			t.Errorf("args %q reached the handler as %s, want {}", args, got)
		}
	}
	// nil RawMessage too.
	wantText(t, ex.Call(context.Background(), "t", nil), "ok")
	if got := string(rec.last(t)); got != `{}` {
		t.Errorf("nil args reached the handler as %s, want {}", got)
	}
	// Empty means {}, so a required property still fails.
	ex2, _ := schemaTool(t, `{"type":"object","required":["a"]}`)
	wantError(t, ex2.Call(context.Background(), "t", json.RawMessage("null")), tool.ReasonInvalidArgs)
}

func TestCallReportsSchemaViolationsAsJSONPointers(t *testing.T) {
	const schema = `{
		"type": "object",
		"required": ["name"],
		"properties": {
			"a": {"type": "object", "properties": {"b": {"type": "string"}}},
			"items": {"type": "array", "items": {"type": "integer"}},
			"x/y": {"type": "string"},
			"t~n": {"type": "string"}
		}
	}`
	tests := []struct {
		name    string
		args    string
		want    []tool.Violation
		message string // substring of Message
	}{
		{"missing required", `{}`,
			[]tool.Violation{{Path: "", Message: "missing property 'name'"}},
			"(root): missing property 'name'"},
		{"wrong type in nested object", `{"name":"n","a":{"b":1}}`,
			[]tool.Violation{{Path: "/a/b", Message: "got number, want string"}},
			"/a/b: got number, want string"},
		{"wrong item type", `{"name":"n","items":[1,2,"three"]}`,
			[]tool.Violation{{Path: "/items/2", Message: "got string, want integer"}},
			"/items/2: got string, want integer"},
		{"pointer escapes slash and tilde", `{"name":"n","x/y":1,"t~n":2}`,
			[]tool.Violation{{Path: "/t~0n", Message: "got number, want string"}, {Path: "/x~1y", Message: "got number, want string"}},
			"/x~1y"},
	}
	ex, rec := schemaTool(t, schema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ex.Call(context.Background(), "t", json.RawMessage(tt.args))
			wantError(t, res, tool.ReasonInvalidArgs)
			got := append([]tool.Violation(nil), res.Violations...)
			// The order of sibling failures is the library's; compare as sets.
			sortViolations(got)
			want := append([]tool.Violation(nil), tt.want...)
			sortViolations(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("violations = %+v, want %+v", got, want)
			}
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q does not contain %q", res.Message, tt.message)
			}
			if !strings.HasPrefix(res.Message, `invalid arguments for tool "t": `) {
				t.Errorf("message %q does not name the tool", res.Message)
			}
		})
	}
	if rec.calls() != 0 {
		t.Errorf("handler called %d times for invalid arguments", rec.calls())
	}
	// Several violations of one call all appear in the message.
	res := ex.Call(context.Background(), "t", json.RawMessage(`{"a":{"b":1},"items":["x"]}`))
	for _, want := range []string{"(root): missing property 'name'", "/a/b:", "/items/0:"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q does not contain %q", res.Message, want)
		}
	}
}

func sortViolations(vs []tool.Violation) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j].Path < vs[j-1].Path; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

func TestCallCapsTheNumberOfViolations(t *testing.T) {
	ex, _ := schemaTool(t, `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}}}}`)
	many := make([]int, 100)
	args, _ := json.Marshal(map[string]any{"l": many})
	res := ex.Call(context.Background(), "t", args)
	wantError(t, res, tool.ReasonInvalidArgs)
	if n := len(res.Violations); n == 0 || n > 20 {
		t.Errorf("100 bad items produced %d violations, want 1..20", n)
	}
}

func TestCallHonoursTheSchemaDraft(t *testing.T) {
	const draft4 = `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object",
		"properties":{"n":{"type":"number","maximum":10,"exclusiveMaximum":true}}}`
	// Sibling keywords of $ref are ignored before 2019-09.
	const draft7 = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"definitions":{"s":{"type":"string"}},
		"properties":{"a":{"$ref":"#/definitions/s","maxLength":1}}}`
	const draft2020 = `{"type":"object","$defs":{"s":{"type":"string"}},
		"properties":{"a":{"$ref":"#/$defs/s","maxLength":1}}}`
	tests := []struct {
		name, schema, args string
		ok                 bool
	}{
		{"draft-04 boolean exclusiveMaximum excludes the maximum", draft4, `{"n":10}`, false},
		{"draft-04 boolean exclusiveMaximum allows below", draft4, `{"n":9.5}`, true},
		{"draft-07 $ref via definitions applies its target", draft7, `{"a":5}`, false},
		{"draft-07 $ref ignores sibling maxLength", draft7, `{"a":"abc"}`, true},
		{"2020-12 $ref via $defs applies its target", draft2020, `{"a":5}`, false},
		{"2020-12 $ref applies sibling maxLength", draft2020, `{"a":"abc"}`, false},
		{"2020-12 $ref accepts a conforming value", draft2020, `{"a":"x"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, rec := schemaTool(t, tt.schema)
			res := ex.Call(context.Background(), "t", json.RawMessage(tt.args))
			if tt.ok {
				wantText(t, res, "ok")
				return
			}
			wantError(t, res, tool.ReasonInvalidArgs)
			if rec.calls() != 0 {
				t.Error("handler called for invalid arguments")
			}
		})
	}
}

func TestSchemaWithoutDollarSchemaIsDraft2020(t *testing.T) {
	// The draft-04 boolean form is not valid 2020-12, so without "$schema"
	// the same schema must not compile.
	reg := tool.NewRegistry(nil)
	err := reg.Register(&tool.Tool{Name: "t", Tier: tool.Read, Handler: okHandler,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"maximum":10,"exclusiveMaximum":true}}}`)})
	if err == nil || !strings.Contains(err.Error(), "exclusiveMaximum") {
		t.Errorf("Register = %v, want a compile error about exclusiveMaximum", err)
	}
}

func TestCallAssertsFormats(t *testing.T) {
	ex, rec := schemaTool(t, `{"type":"object","properties":{"e":{"type":"string","format":"email"}}}`)
	res := ex.Call(context.Background(), "t", json.RawMessage(`{"e":"nope"}`))
	wantError(t, res, tool.ReasonInvalidArgs)
	if len(res.Violations) != 1 || res.Violations[0].Path != "/e" || !strings.Contains(res.Violations[0].Message, "email") {
		t.Errorf("violations = %+v, want one at /e about email", res.Violations)
	}
	wantText(t, ex.Call(context.Background(), "t", json.RawMessage(`{"e":"a@example.com"}`)), "ok")
	if rec.calls() != 1 {
		t.Errorf("handler called %d times, want 1 (only for the valid email)", rec.calls())
	}
}

func TestHandlerReceivesReencodedValidatedArgs(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"duplicate key keeps the last value, the one validated", `{"a":1,"a":2}`, `{"a":2}`},
		{"big integer keeps its digits", `{"n":12345678901234567890}`, `{"n":12345678901234567890}`},
		{"precise decimal keeps its digits", `{"n":0.10000000000000000000001}`, `{"n":0.10000000000000000000001}`},
		{"whitespace and key order normalised", "{ \"b\" : true ,\n \"a\" : [ 1 , 2 ] }", `{"a":[1,2],"b":true}`},
		{"HTML characters are not escaped", `{"s":"<a&b>"}`, `{"s":"<a&b>"}`},
	}
	ex, rec := schemaTool(t, `{"type":"object","properties":{"a":{"type":["integer","array"]},"n":{"type":"number"}}}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantText(t, ex.Call(context.Background(), "t", json.RawMessage(tt.args)), "ok")
			if got := string(rec.last(t)); got != tt.want {
				t.Errorf("handler got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDuplicateKeyCannotSmuggleAnInvalidValue(t *testing.T) {
	// The first "a" is invalid, the last valid: the validator sees the last,
	// and so must the handler.
	ex, rec := schemaTool(t, `{"type":"object","properties":{"a":{"type":"integer","maximum":5}}}`)
	wantText(t, ex.Call(context.Background(), "t", json.RawMessage(`{"a":999,"a":1}`)), "ok")
	if got := string(rec.last(t)); got != `{"a":1}` {
		t.Errorf("handler got %s, want {\"a\":1}", got)
	}
	// The other way round is refused.
	wantError(t, ex.Call(context.Background(), "t", json.RawMessage(`{"a":1,"a":999}`)), tool.ReasonInvalidArgs)
	if rec.calls() != 1 {
		t.Errorf("handler called %d times, want 1", rec.calls())
	}
}
