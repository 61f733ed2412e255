package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

func readTool(name string) *tool.Tool {
	return &tool.Tool{Name: name, Tier: tool.Read, Handler: okHandler}
}

func names(tools []*tool.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func TestRegistryRegisterLookupListLenHasDeregister(t *testing.T) {
	reg := tool.NewRegistry(nil)
	if reg.Len() != 0 || len(reg.List()) != 0 {
		t.Fatalf("new registry has %d tools", reg.Len())
	}
	if reg.CanConfirm() {
		t.Error("CanConfirm() = true for a registry without a confirmer")
	}
	b, c, a := readTool("b"), readTool("c"), readTool("a")
	if err := reg.Register(b); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterAll([]*tool.Tool{c, a}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Len(); got != 3 {
		t.Errorf("Len() = %d, want 3", got)
	}
	if got := names(reg.List()); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("List() names = %v, want sorted [a b c]", got)
	}
	if got, ok := reg.Lookup("b"); !ok || got != b {
		t.Errorf("Lookup(b) = %p, %v; want the registered tool %p", got, ok, b)
	}
	if got, ok := reg.Lookup("zzz"); ok || got != nil {
		t.Errorf("Lookup(zzz) = %v, %v; want nil, false", got, ok)
	}
	if !reg.Has("a") || reg.Has("A") {
		t.Errorf("Has(a) = %v, Has(A) = %v; want true, false (names are case-sensitive)", reg.Has("a"), reg.Has("A"))
	}
	if n := reg.Deregister("a", "nope", "c", "a"); n != 2 {
		t.Errorf("Deregister(a, nope, c, a) = %d, want 2", n)
	}
	if got := names(reg.List()); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("after Deregister, List() = %v, want [b]", got)
	}
	if reg.Has("a") || reg.Len() != 1 {
		t.Errorf("after Deregister, Has(a) = %v, Len() = %d", reg.Has("a"), reg.Len())
	}
	// A deregistered name can be registered again.
	if err := reg.Register(readTool("a")); err != nil {
		t.Errorf("re-registering a deregistered name: %v", err)
	}
}

func TestRegistryDuplicateOfRegisteredNameRefusesWholeBatch(t *testing.T) {
	reg := newRegistry(t, nil, readTool("taken"))
	err := reg.RegisterAll([]*tool.Tool{readTool("fresh1"), readTool("taken"), readTool("fresh2")})
	if !errors.Is(err, tool.ErrDuplicateName) {
		t.Fatalf("err = %v, want ErrDuplicateName", err)
	}
	if !strings.Contains(err.Error(), `"taken"`) {
		t.Errorf("error %q does not name the duplicate", err)
	}
	if reg.Has("fresh1") || reg.Has("fresh2") || reg.Len() != 1 {
		t.Errorf("refused batch was partly registered: %v", names(reg.List()))
	}
}

func TestRegistryDuplicateWithinOneBatchRefusesWholeBatch(t *testing.T) {
	reg := tool.NewRegistry(nil)
	first, second := readTool("twin"), readTool("twin")
	err := reg.RegisterAll([]*tool.Tool{readTool("other"), first, second})
	if !errors.Is(err, tool.ErrDuplicateName) {
		t.Fatalf("err = %v, want ErrDuplicateName", err)
	}
	if reg.Len() != 0 {
		t.Errorf("refused batch registered %v", names(reg.List()))
	}
}

func TestRegistryWriteAndDestructiveNeedConfirmer(t *testing.T) {
	for _, tier := range []tool.Tier{tool.Write, tool.Destructive} {
		t.Run(tier.String(), func(t *testing.T) {
			reg := tool.NewRegistry(&tool.RegistryOptions{}) // options without a confirmer
			risky := &tool.Tool{Name: "risky", Tier: tier, Handler: okHandler}
			err := reg.RegisterAll([]*tool.Tool{readTool("harmless"), risky})
			if !errors.Is(err, tool.ErrNeedsConfirmer) {
				t.Fatalf("err = %v, want ErrNeedsConfirmer", err)
			}
			if reg.Len() != 0 {
				t.Errorf("refused batch registered %v", names(reg.List()))
			}

			withConfirmer := tool.NewRegistry(&tool.RegistryOptions{Confirmer: &confirmRecorder{answer: true}})
			if !withConfirmer.CanConfirm() {
				t.Error("CanConfirm() = false with a confirmer")
			}
			if err := withConfirmer.Register(risky); err != nil {
				t.Errorf("with a confirmer, Register(%v tool) = %v", tier, err)
			}
		})
	}
}

func TestRegistryRefusesInvalidTools(t *testing.T) {
	long := strings.Repeat("a", 65)
	tests := []struct {
		name    string
		tool    *tool.Tool
		is      error  // sentinel the error must wrap, if any
		mention string // text the error must contain
	}{
		{"65-char name", &tool.Tool{Name: long, Tier: tool.Read, Handler: okHandler}, nil, "name must match"},
		{"name with space", &tool.Tool{Name: "has space", Tier: tool.Read, Handler: okHandler}, nil, "name must match"},
		{"name with dot", &tool.Tool{Name: "a.b", Tier: tool.Read, Handler: okHandler}, nil, "name must match"},
		{"name with trailing newline", &tool.Tool{Name: "abc\n", Tier: tool.Read, Handler: okHandler}, nil, "name must match"},
		{"empty name", &tool.Tool{Name: "", Tier: tool.Read, Handler: okHandler}, nil, "name must match"},
		{"zero tier", &tool.Tool{Name: "t", Handler: okHandler}, tool.ErrInvalidTier, `"t"`},
		{"out of range tier", &tool.Tool{Name: "t", Tier: 7, Handler: okHandler}, tool.ErrInvalidTier, `"t"`},
		{"nil handler", &tool.Tool{Name: "t", Tier: tool.Read}, nil, "no handler"},
		{"schema that does not compile", &tool.Tool{Name: "t", Tier: tool.Read, Handler: okHandler, InputSchema: json.RawMessage(`{"type": 12}`)}, nil, "does not compile"},
		{"schema that is not JSON", &tool.Tool{Name: "t", Tier: tool.Read, Handler: okHandler, InputSchema: json.RawMessage(`{"type":`)}, nil, "not valid JSON"},
		{"schema that is null", &tool.Tool{Name: "t", Tier: tool.Read, Handler: okHandler, InputSchema: json.RawMessage(`null`)}, nil, "input schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := tool.NewRegistry(nil)
			err := reg.RegisterAll([]*tool.Tool{readTool("good"), tt.tool})
			if err == nil {
				t.Fatal("RegisterAll succeeded, want error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("err = %q, want it to mention %q", err, tt.mention)
			}
			if reg.Len() != 0 {
				t.Errorf("refused batch registered %v", names(reg.List()))
			}
		})
	}
}

func TestRegistryAcceptsNamesAtTheLimits(t *testing.T) {
	for _, name := range []string{"a", strings.Repeat("z", 64), "A-Za_z0-9", "-", "_"} {
		if !tool.ValidName(name) {
			t.Errorf("ValidName(%q) = false", name)
		}
		reg := tool.NewRegistry(nil)
		if err := reg.Register(readTool(name)); err != nil {
			t.Errorf("Register(%q): %v", name, err)
		}
	}
}

func TestRegistryReportsEveryProblemOfABatch(t *testing.T) {
	reg := tool.NewRegistry(nil)
	err := reg.RegisterAll([]*tool.Tool{
		{Name: "w", Tier: tool.Write, Handler: okHandler},
		{Name: "z", Handler: okHandler},
		readTool("d"), readTool("d"),
	})
	for _, sentinel := range []error{tool.ErrNeedsConfirmer, tool.ErrInvalidTier, tool.ErrDuplicateName} {
		if !errors.Is(err, sentinel) {
			t.Errorf("err = %v, want it to wrap %v", err, sentinel)
		}
	}
}

func TestRegistryRefusesExternalFileRefWithoutReadingIt(t *testing.T) {
	// A schema file that, if it were loaded, would compile fine: so a
	// refusal can only mean the reference was never followed.
	dir := t.TempDir()
	path := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(path, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file:///etc/passwd", "file://" + filepath.ToSlash(path), "https://example.com/schema.json"} {
		t.Run(ref, func(t *testing.T) {
			reg := tool.NewRegistry(nil)
			schema, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"p": map[string]any{"$ref": ref}}})
			err := reg.Register(&tool.Tool{Name: "t", Tier: tool.Read, Handler: okHandler, InputSchema: schema})
			if err == nil {
				t.Fatal("schema with an external $ref was accepted")
			}
			if !strings.Contains(err.Error(), ref) {
				t.Errorf("error %q does not mention the reference %q", err, ref)
			}
			if !strings.Contains(err.Error(), "not loaded") {
				t.Errorf("error %q does not say the reference was not loaded", err)
			}
			if strings.Contains(err.Error(), "root:") {
				t.Errorf("error %q appears to quote /etc/passwd", err)
			}
			if reg.Has("t") {
				t.Error("tool registered despite the error")
			}
		})
	}
}

func TestRegistryNilInputSchemaAcceptsAnyObject(t *testing.T) {
	rec := &recorder{}
	tl := &tool.Tool{Name: "any", Tier: tool.Read, Handler: rec.handle}
	reg := newRegistry(t, nil, tl)
	if got := string(tl.Schema()); got != `{"type":"object"}` {
		t.Errorf("Schema() of a tool without one = %s, want {\"type\":\"object\"}", got)
	}
	ex := tool.NewExecutor(reg, nil)
	for _, args := range []string{`{}`, `{"x":[1,{"y":null}],"z":"s"}`} {
		wantText(t, ex.Call(context.Background(), "any", json.RawMessage(args)), "ok")
	}
	if rec.calls() != 2 {
		t.Errorf("handler called %d times, want 2", rec.calls())
	}
	wantError(t, ex.Call(context.Background(), "any", json.RawMessage(`[1]`)), tool.ReasonInvalidArgs)
}

func TestCompileSchemaReportsBrokenSchemaBeforeRegistration(t *testing.T) {
	bad := &tool.Tool{Name: "bad", Tier: tool.Read, Handler: okHandler, InputSchema: json.RawMessage(`{"type":12}`)}
	if err := bad.CompileSchema(); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("CompileSchema() = %v, want an error naming the tool", err)
	}
	good := &tool.Tool{Name: "good", Tier: tool.Read, Handler: okHandler, InputSchema: json.RawMessage(`{"type":"object","required":["a"]}`)}
	if err := good.CompileSchema(); err != nil {
		t.Fatalf("CompileSchema() = %v", err)
	}
	// The precompiled schema is the one used after registration.
	ex := tool.NewExecutor(newRegistry(t, nil, good), nil)
	wantError(t, ex.Call(context.Background(), "good", nil), tool.ReasonInvalidArgs)
}
