package mcpclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain_name-09AZaz", "plain_name-09AZaz"},
		{"with space", "with_space"},
		{"a.b/c:d", "a_b_c_d"},
		{"héllo", "h_llo"},          // one rune, one underscore, not one per byte
		{"日本語", "___"},              // three runes
		{"smile🙂", "smile_"},        // a 4-byte rune
		{"bad\xffbyte", "bad_byte"}, // an invalid byte is one character too
		{"tab\tnew\nline", "tab_new_line"},
	} {
		if got := sanitize(tc.in); got != tc.want {
			t.Errorf("sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := sanitize(tc.in); tc.in != "" && !tool.ValidName(got) {
			t.Errorf("sanitize(%q) = %q is not a valid tool name", tc.in, got)
		}
	}
}

// hash8 is the suffix registeredName gives a name it had to change.
func hash8(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "_" + hex.EncodeToString(sum[:4])
}

func TestRegisteredName(t *testing.T) {
	x := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name         string
		prefix, tool string
		want         string
	}{
		{"plain", "srv", "read_file", "srv__read_file"},
		{"dashes kept", "srv", "read-file", "srv__read-file"},
		{"dots and spaces", "srv", "my tool.v2", "srv__my_tool_v2" + hash8("my tool.v2")},
		{"unicode", "srv", "café_☕", "srv__caf___" + hash8("café_☕")},
		{"prefix sanitized", "my srv.io", "x", "my_srv_io__x"},
		{"empty prefix", "", "a_b", "a_b"},
		{"empty prefix, dotted", "", "a.b", "a_b" + hash8("a.b")},
		{"exactly 64 kept", "p", x(61), "p__" + x(61)},
		{"65 cut and hashed", "p", x(62), "p__" + x(52) + hash8(x(62))},
		{"long cut and hashed", "p", x(200), "p__" + x(52) + hash8(x(200))},
		{"long prefix", x(70), "tool", x(55) + hash8("tool")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := registeredName(tc.prefix, tc.tool)
			if got != tc.want {
				t.Errorf("registeredName(%q, %q) = %q (len %d), want %q (len %d)", tc.prefix, tc.tool, got, len(got), tc.want, len(tc.want))
			}
			if !tool.ValidName(got) {
				t.Errorf("%q is not a valid registered name", got)
			}
		})
	}
}

// Names that sanitize alike, or are alike in their first 64 characters,
// never share a registered name, whatever the order they come in.
func TestRegisteredNameSeparatesLookAlikes(t *testing.T) {
	long := strings.Repeat("y", 70)
	for _, group := range [][]string{
		{"a.b", "a_b", "a-b", "a b", "a/b", "a:b"},
		{long + "1", long + "2", long[:62], long[:61]},
	} {
		seen := map[string]string{}
		for _, n := range group {
			got := registeredName("h", n)
			if other, ok := seen[got]; ok {
				t.Errorf("%q and %q both get %q", other, n, got)
			}
			seen[got] = n
		}
	}
	if got := registeredName("h", "a_b"); got != "h__a_b" {
		t.Errorf("the exact name a_b got %q, want h__a_b", got)
	}
}

// Issue 12.1: a listing in another order gives every tool the same name.
func TestAdaptNamesDoNotDependOnOrder(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	names := []string{"a.b", "a_b", "a b", strings.Repeat("z", 70) + "1", strings.Repeat("z", 70) + "2"}
	handler := func(string) tool.Handler {
		return func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }
	}
	cfg := config.Server{Name: "h"}
	byOrigin := func(listing []*mcp.Tool) map[string]string {
		ad, err := adapt(cfg, listing, handler)
		if err != nil {
			t.Fatal(err)
		}
		if len(ad.tools) != len(names) || len(ad.skipped) != 0 {
			t.Fatalf("adapted %d tools, skipped %+v; want %d and none", len(ad.tools), ad.skipped, len(names))
		}
		m := map[string]string{}
		for _, tl := range ad.tools {
			m[tl.Origin.Name] = tl.Name
		}
		return m
	}
	var forward, backward []*mcp.Tool
	for i := range names {
		forward = append(forward, &mcp.Tool{Name: names[i], InputSchema: obj})
		backward = append(backward, &mcp.Tool{Name: names[len(names)-1-i], InputSchema: obj})
	}
	a, b := byOrigin(forward), byOrigin(backward)
	for _, n := range names {
		if a[n] != b[n] {
			t.Errorf("tool %q is %q in one order and %q in the other", n, a[n], b[n])
		}
	}
	if a["a_b"] != "h__a_b" {
		t.Errorf("a_b = %q, want the plain h__a_b", a["a_b"])
	}
}

// A server that lists a name twice, or crafts a name equal to another's
// hashed form, does not decide by order who gets the name.
func TestAdaptClashes(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	handler := func(string) tool.Handler {
		return func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }
	}
	crafted := "a_b" + hash8("a.b")
	for _, order := range [][]string{{"a.b", crafted, "dup", "dup"}, {"dup", crafted, "dup", "a.b"}} {
		var listing []*mcp.Tool
		for _, n := range order {
			listing = append(listing, &mcp.Tool{Name: n, InputSchema: obj})
		}
		ad, err := adapt(config.Server{Name: "h"}, listing, handler)
		if err != nil {
			t.Fatal(err)
		}
		if len(ad.tools) != 1 || ad.tools[0].Origin.Name != crafted || ad.tools[0].Name != "h__"+crafted {
			t.Errorf("order %q: adapted %+v, want only the crafted tool under its own name", order, ad.tools)
		}
		skipped := map[string]string{}
		for _, sk := range ad.skipped {
			skipped[sk.Name] += sk.Reason
		}
		if !strings.Contains(skipped["a.b"], crafted) || !strings.Contains(skipped["dup"], "2 times") {
			t.Errorf("order %q: skipped %q, want a.b (its name is the crafted tool's) and both dup", order, skipped)
		}
	}
}

func TestTiersResolve(t *testing.T) {
	yes, no := new(true), new(false)
	mk := func(name string, a *mcp.ToolAnnotations) *mcp.Tool { return &mcp.Tool{Name: name, Annotations: a} }
	for _, tc := range []struct {
		name     string
		def      string
		override string // tier override for the tool, "" for none
		ann      *mcp.ToolAnnotations
		want     tool.Tier
	}{
		{name: "default read", ann: nil, want: tool.Read},
		{name: "configured default", def: "write", want: tool.Write},
		{name: "override wins over default", def: "write", override: "read", want: tool.Read},
		{name: "override write", override: "write", want: tool.Write},
		{name: "destructiveHint raises read", ann: &mcp.ToolAnnotations{DestructiveHint: yes}, want: tool.Destructive},
		{name: "destructiveHint raises read override", override: "read", ann: &mcp.ToolAnnotations{DestructiveHint: yes}, want: tool.Destructive},
		{name: "destructiveHint raises write", override: "write", ann: &mcp.ToolAnnotations{DestructiveHint: yes}, want: tool.Destructive},
		{name: "destructiveHint keeps destructive", def: "destructive", ann: &mcp.ToolAnnotations{DestructiveHint: yes}, want: tool.Destructive},
		{name: "destructiveHint false does not lower write", override: "write", ann: &mcp.ToolAnnotations{DestructiveHint: no}, want: tool.Write},
		{name: "destructiveHint false does not lower destructive", override: "destructive", ann: &mcp.ToolAnnotations{DestructiveHint: no}, want: tool.Destructive},
		{name: "readOnlyHint does not lower write", override: "write", ann: &mcp.ToolAnnotations{ReadOnlyHint: true}, want: tool.Write},
		{name: "readOnlyHint does not lower default destructive", def: "destructive", ann: &mcp.ToolAnnotations{ReadOnlyHint: true}, want: tool.Destructive},
		{name: "readOnlyHint and destructiveHint false keep write", override: "write", ann: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: no}, want: tool.Write},
		{name: "unset destructiveHint does not raise", ann: &mcp.ToolAnnotations{}, want: tool.Read},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Server{Name: "s", DefaultTier: tc.def}
			if tc.override != "" {
				cfg.TierOverrides = map[string]string{"t": tc.override}
			}
			p, err := parseTiers(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.resolve(mk("t", tc.ann)); got != tc.want {
				t.Errorf("resolve = %s, want %s", got, tc.want)
			}
			// Another tool is untouched by t's override.
			if tc.override != "" && tc.ann == nil {
				if got, want := p.resolve(mk("other", nil)), p.def; got != want {
					t.Errorf("other tool = %s, want the default %s", got, want)
				}
			}
		})
	}
}

func TestParseTiersErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.Server
		want []string
	}{
		{"default", config.Server{DefaultTier: "admin"}, []string{"defaultTier", `"admin"`}},
		{"override", config.Server{TierOverrides: map[string]string{"rm_rf": "Destructive"}}, []string{"tierOverrides.rm_rf", `"Destructive"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTiers(tc.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
	if p, err := parseTiers(config.Server{}); err != nil || p.def != tool.Read {
		t.Errorf("empty config = %+v, %v; want default read", p, err)
	}
}

func TestSelected(t *testing.T) {
	for _, tc := range []struct {
		name          string
		only, exclude []string
		tool          string
		want          bool
	}{
		{"nil onlyTools selects all", nil, nil, "x", true},
		{"empty onlyTools selects none", []string{}, nil, "x", false},
		{"listed", []string{"x", "y"}, nil, "y", true},
		{"not listed", []string{"x"}, nil, "y", false},
		{"excluded", nil, []string{"x"}, "x", false},
		{"exclude wins over only", []string{"x"}, []string{"x"}, "x", false},
		{"exclude of another", nil, []string{"y"}, "x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Server{OnlyTools: tc.only, ExcludeTools: tc.exclude}
			if got := selected(cfg, tc.tool); got != tc.want {
				t.Errorf("selected(%q) = %v, want %v", tc.tool, got, tc.want)
			}
		})
	}
}

func TestUnmatched(t *testing.T) {
	cfg := config.Server{
		Name:          "srv",
		OnlyTools:     []string{"echo", "ghost"},
		ExcludeTools:  []string{"phantom", "add"},
		TierOverrides: map[string]string{"zeta": "write", "echo": "write", "alpha": "read"},
	}
	got := unmatched(cfg, map[string]bool{"echo": true, "add": true})
	want := []string{
		`server "srv": onlyTools names tool "ghost", which the server does not list`,
		`server "srv": excludeTools names tool "phantom", which the server does not list`,
		`server "srv": tierOverrides names tool "alpha", which the server does not list`,
		`server "srv": tierOverrides names tool "zeta", which the server does not list`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("unmatched =\n%q\nwant\n%q", got, want)
	}
	if got := unmatched(config.Server{Name: "srv", OnlyTools: []string{}}, nil); len(got) != 0 {
		t.Errorf("nothing configured: %q", got)
	}
}

func TestAdapt(t *testing.T) {
	obj := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	broken := json.RawMessage(`{"type":"object","properties":{"x":{"type":12}}}`)
	listing := []*mcp.Tool{
		nil,
		{Name: "a.b", Description: "broken one", InputSchema: broken},
		{Name: "a_b", Description: "  Does things.  ", InputSchema: obj},
		{Name: "bare"}, // no schema at all
		{Name: "titled", Title: "A Title", InputSchema: map[string]any{"type": "object"}},
		{Name: "", InputSchema: obj},
		{Name: "kill", InputSchema: obj, Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}},
		{Name: "taken", InputSchema: obj},
		{Name: "filtered", InputSchema: obj},
	}
	cfg := config.Server{
		Name:          "Srv",
		Prefix:        "p",
		DefaultTier:   "read",
		TierOverrides: map[string]string{"bare": "write", "nowhere": "read"},
		ExcludeTools:  []string{"filtered"},
	}
	var handled []string
	handler := func(original string) tool.Handler {
		handled = append(handled, original)
		return func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult(original), nil }
	}
	ad, err := adapt(cfg, listing, handler)
	if err != nil {
		t.Fatal(err)
	}

	byName := map[string]*tool.Tool{}
	var names []string
	for _, tl := range ad.tools {
		byName[tl.Name] = tl
		names = append(names, tl.Name)
	}
	wantNames := []string{"p__a_b", "p__bare", "p__titled", "p__kill", "p__taken"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("adapted %v, want %v", names, wantNames)
	}

	if len(ad.skipped) != 2 {
		t.Fatalf("skipped = %+v, want the broken schema and the nameless tool", ad.skipped)
	}
	if sk := ad.skipped[0]; sk.Name != "a.b" || !strings.Contains(sk.Reason, "schema") || strings.Contains(sk.Reason, `tool "`) {
		t.Errorf("skipped[0] = %+v, want a.b with a schema reason that does not repeat the tool name", sk)
	}
	if sk := ad.skipped[1]; sk.Name != "" || sk.Reason == "" {
		t.Errorf("skipped[1] = %+v, want the nameless tool with a reason", sk)
	}

	if got := string(byName["p__bare"].InputSchema); got != `{"type":"object"}` {
		t.Errorf("missing schema became %s, want {\"type\":\"object\"}", got)
	}
	if got := byName["p__a_b"].InputSchema; string(got) != string(obj) {
		t.Errorf("raw schema changed to %s", got)
	}
	var titled map[string]any
	if err := json.Unmarshal(byName["p__titled"].InputSchema, &titled); err != nil || titled["type"] != "object" {
		t.Errorf("map schema became %s (%v)", byName["p__titled"].InputSchema, err)
	}

	for name, want := range map[string]string{
		"p__a_b":    `Does things. (from MCP server "Srv")`,
		"p__titled": `A Title (from MCP server "Srv")`,
		"p__bare":   `Tool "bare" of MCP server "Srv".`,
	} {
		if got := byName[name].Description; got != want {
			t.Errorf("%s description = %q, want %q", name, got, want)
		}
	}

	for name, want := range map[string]tool.Tier{"p__a_b": tool.Read, "p__bare": tool.Write, "p__kill": tool.Destructive} {
		if got := byName[name].Tier; got != want {
			t.Errorf("%s tier = %s, want %s", name, got, want)
		}
	}
	for _, tl := range ad.tools {
		if tl.Origin.Source != "Srv" || tl.Name != registeredName("p", tl.Origin.Name) {
			t.Errorf("%s origin = %+v", tl.Name, tl.Origin)
		}
		if err := tl.CompileSchema(); err != nil {
			t.Errorf("%s: %v", tl.Name, err)
		}
		res, _ := tl.Handler(context.Background(), nil)
		if res.Text() != tl.Origin.Name {
			t.Errorf("%s handler calls %q, want the original %q", tl.Name, res.Text(), tl.Origin.Name)
		}
	}
	if want := []string{`server "Srv": tierOverrides names tool "nowhere", which the server does not list`}; !slices.Equal(ad.warnings, want) {
		t.Errorf("warnings = %q, want %q", ad.warnings, want)
	}

	// Every registered name is usable as is.
	reg := confirmingRegistry()
	if err := reg.RegisterAll(ad.tools); err != nil {
		t.Errorf("RegisterAll(adapted) = %v", err)
	}
}

func TestAdaptPrefixDefaultsToServerName(t *testing.T) {
	ad, err := adapt(config.Server{Name: "my server"}, []*mcp.Tool{{Name: "t"}},
		func(string) tool.Handler {
			return func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(ad.tools) != 1 || ad.tools[0].Name != "my_server__t" {
		t.Errorf("adapted %+v, want my_server__t", ad.tools)
	}
}

func TestAdaptBadTier(t *testing.T) {
	_, err := adapt(config.Server{Name: "s", DefaultTier: "nope"}, []*mcp.Tool{{Name: "t"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "defaultTier") {
		t.Errorf("adapt with a bad default tier = %v, want an error naming defaultTier", err)
	}
}

// A schema that refers outside itself (here to a local file) is not loaded:
// the tool is skipped with a reason.
func TestAdaptRefusesExternalRef(t *testing.T) {
	listing := []*mcp.Tool{
		{Name: "peek", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"file:///etc/passwd"}}}`)},
		{Name: "fine", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`)},
	}
	h := func(string) tool.Handler {
		return func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }
	}
	ad, err := adapt(config.Server{Name: "s"}, listing, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(ad.tools) != 1 || ad.tools[0].Name != "s__fine" {
		t.Errorf("adapted %v, want only s__fine", ad.tools)
	}
	if len(ad.skipped) != 1 || ad.skipped[0].Name != "peek" || !strings.Contains(ad.skipped[0].Reason, "file:///etc/passwd") {
		t.Errorf("skipped = %+v, want peek with a reason naming the reference", ad.skipped)
	}
}
