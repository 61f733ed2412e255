package mcpclient

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/pins"
)

func TestCutDescription(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		limit int
		want  string
		cut   bool
	}{
		{"under", "short", 10, "short", false},
		{"at the limit", "0123456789", 10, "0123456789", false},
		{"ascii", "0123456789abc", 10, "0123456789… [cut by toolwire: 3 more characters]", true},
		// Ten runes of two bytes each: within the limit though 20 bytes.
		{"runes not bytes", strings.Repeat("é", 10), 10, strings.Repeat("é", 10), false},
		{"two-byte runes", strings.Repeat("é", 12), 10, strings.Repeat("é", 10) + "… [cut by toolwire: 2 more characters]", true},
		{"four-byte runes", "ab😀😀😀", 3, "ab😀… [cut by toolwire: 2 more characters]", true},
		{"limit one", "xyz", 1, "x… [cut by toolwire: 2 more characters]", true},
		{"no limit", strings.Repeat("x", 100), 0, strings.Repeat("x", 100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := cutDescription(tc.in, tc.limit)
			if got != tc.want || cut != tc.cut {
				t.Errorf("cutDescription(%q, %d) = %q, %v; want %q, %v", tc.in, tc.limit, got, cut, tc.want, tc.cut)
			}
			if !utf8.ValidString(got) {
				t.Errorf("cut in the middle of a rune: %q", got)
			}
		})
	}
}

// Whatever the limit, the cut text is valid UTF-8, keeps exactly limit
// runes of the original and says how many it dropped.
func FuzzCutDescription(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("😀😀😀", 1)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if !utf8.ValidString(s) || limit <= 0 || limit > 1<<20 {
			return
		}
		got, cut := cutDescription(s, limit)
		n := utf8.RuneCountInString(s)
		if !cut {
			if got != s || n > limit {
				t.Fatalf("cutDescription(%q, %d) = %q, not cut", s, limit, got)
			}
			return
		}
		kept, marker, ok := strings.Cut(got, "… [cut by toolwire: ")
		if !ok || !strings.HasPrefix(s, kept) || utf8.RuneCountInString(kept) != limit || marker != fmt.Sprintf("%d more characters]", n-limit) {
			t.Fatalf("cutDescription(%q, %d) = %q", s, limit, got)
		}
	})
}

// The definitions pinned are what toolwire shows: the trimmed description,
// or the title when there is none; the schema as registered; annotations
// in a fixed encoding. Tools the configuration leaves out are not pinned.
func TestPrepareDefinitions(t *testing.T) {
	yes := true
	listing := []*mcp.Tool{
		{Name: "plain", Description: "  does things \n", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}},
		{Name: "titled", Title: "Titled tool", InputSchema: json.RawMessage(`{"type":"object"}`)},
		nil,
		{Name: "annotated", Description: "d", InputSchema: json.RawMessage(`{"type": "object"}`), Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, Title: "A"}},
		{Name: "excluded", Description: "x", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "noschema", Description: "n"},
	}
	shown, defs := prepare(config.Server{Name: "s", ExcludeTools: []string{"excluded"}}, listing, 0)
	if len(shown) != 5 {
		t.Errorf("prepare kept %d tools for adapt, want the 5 non-nil ones", len(shown))
	}
	want := []pins.Definition{
		{Name: "plain", Description: "does things", InputSchema: json.RawMessage(`{"properties":{"n":{"type":"integer"}},"type":"object"}`)},
		{Name: "titled", Description: "Titled tool", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "annotated", Description: "d", InputSchema: json.RawMessage(`{"type": "object"}`),
			Annotations: json.RawMessage(`{"destructiveHint":true,"idempotentHint":false,"readOnlyHint":false,"title":"A"}`)},
		{Name: "noschema", Description: "n", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	if len(defs) != len(want) {
		t.Fatalf("defs = %+v, want %d", defs, len(want))
	}
	for i := range want {
		g, w := defs[i], want[i]
		if g.Name != w.Name || g.Description != w.Description || string(g.InputSchema) != string(w.InputSchema) || string(g.Annotations) != string(w.Annotations) {
			t.Errorf("defs[%d] = {%s %q %s %s}, want {%s %q %s %s}", i, g.Name, g.Description, g.InputSchema, g.Annotations, w.Name, w.Description, w.InputSchema, w.Annotations)
		}
	}
	// What the server sent is left as it was.
	if listing[0].Description != "  does things \n" {
		t.Error("prepare changed the SDK's tool")
	}
}

// Annotations are fingerprinted in one encoding whatever MCPGODEBUG says:
// false hints are written, absent pointer hints are not.
func TestAnnotationsJSONIsFixed(t *testing.T) {
	no := false
	for _, tc := range []struct {
		in   *mcp.ToolAnnotations
		want string
	}{
		{nil, ""},
		{&mcp.ToolAnnotations{}, `{"idempotentHint":false,"readOnlyHint":false}`},
		{&mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}, `{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
	} {
		if got := string(annotationsJSON(tc.in)); got != tc.want {
			t.Errorf("annotationsJSON(%+v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// A long description reaches the registry cut, with the marker, while the
// pin covers the whole of it: a change past the cut is still caught.
func TestDescriptionCutAndPinnedWhole(t *testing.T) {
	t.Parallel()
	head := strings.Repeat("é", 10)
	long := head + " and then a tail the model never sees"
	store := pinStore(t)
	srv, url1 := toolServer(t, objTool("long", long))
	reg := confirmingRegistry()
	s := connect(t, httpConfig("srv", url1), reg, &Options{Pins: store, PinMode: pins.Enforce, MaxDescription: 10})
	tl, ok := reg.Lookup("srv__long")
	if !ok {
		t.Fatal("srv__long not registered")
	}
	rest := utf8.RuneCountInString(long) - 10
	if want := fmt.Sprintf(`%s… [cut by toolwire: %d more characters] (from MCP server "srv")`, head, rest); tl.Description != want {
		t.Errorf("registered description %q, want %q", tl.Description, want)
	}
	def := definition(t, s, "long")
	if def.Description != long {
		t.Errorf("pinned description %q, want the whole %q", def.Description, long)
	}
	fp, err := pins.Fingerprint(def)
	if err != nil {
		t.Fatal(err)
	}
	if got := pinsOf(t, store, "srv")["long"]; got != fp {
		t.Errorf("pin %s, want the fingerprint of the whole description %s", got, fp)
	}
	_ = s.Close()

	// The same server, at the next start: the same first ten characters,
	// another tail.
	srv.AddTool(objTool("long", head+" and then a tail that says something else"), answer("long"))
	watch, log := newAuditWatch()
	reg = confirmingRegistry()
	s = connect(t, httpConfig("srv", url1), reg, &Options{Pins: store, PinMode: pins.Enforce, MaxDescription: 10, Audit: log})
	if reg.Has("srv__long") {
		t.Error("a change past the cut went unnoticed")
	}
	if evs := watch.of(audit.ToolQuarantined); len(evs) != 1 || !slices.Equal(evs[0].Fields, []string{"description"}) {
		t.Errorf("tool.quarantined events %+v", evs)
	}
}

// Without a configured limit the default applies.
func TestDescriptionDefaultLimit(t *testing.T) {
	s := newServer(httpConfig("srv", ""), confirmingRegistry(), nil)
	if got := s.tools.descriptionLimit(); got != config.DefaultMaxDescription {
		t.Errorf("descriptionLimit() = %d, want %d", got, config.DefaultMaxDescription)
	}
	shown, _ := prepare(config.Server{Name: "srv"}, []*mcp.Tool{objTool("t", strings.Repeat("x", config.DefaultMaxDescription+5))}, s.tools.descriptionLimit())
	if !strings.HasSuffix(shown[0].Description, "… [cut by toolwire: 5 more characters]") {
		t.Errorf("description not cut at the default: ...%q", shown[0].Description[len(shown[0].Description)-60:])
	}
}

// A server listing more tools than MaxTools is reported once (a warning and
// a tools.exceeded event) and its tools are all registered.
func TestMaxToolsReported(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	var tools []*mcp.Tool
	for i := range 5 {
		tools = append(tools, objTool(fmt.Sprintf("t%d", i), "tool"))
	}
	srv, url := toolServer(t, tools...)
	watch, log := newAuditWatch()
	logs := &logRecords{}
	reg := confirmingRegistry()
	connect(t, httpConfig("srv", url), reg, &Options{MaxTools: 3, Audit: log, Logger: slog.New(logs)})
	if got := len(toolNames(reg)); got != 5 {
		t.Errorf("%d tools registered, want all 5", got)
	}
	evs := watch.of(audit.ToolsExceeded)
	if len(evs) != 1 || evs[0].Source != "srv" || evs[0].Tools != 5 || evs[0].Limit != 3 {
		t.Errorf("tools.exceeded events %+v, want one for srv with 5 tools over 3", evs)
	}
	if !slices.ContainsFunc(logs.lines(), func(l string) bool {
		return strings.HasPrefix(l, "WARN ") && strings.Contains(l, "server=srv tools=5 limit=3")
	}) {
		t.Errorf("no warning in %q", logs.lines())
	}

	// Still over the limit after a re-listing: not reported again.
	srv.AddTool(objTool("t5", "tool"), answer("t5"))
	watch.waitFor(t, ctx, "t5 registered", func([]audit.Event) bool { return reg.Has("srv__t5") })
	if evs := watch.of(audit.ToolsExceeded); len(evs) != 1 {
		t.Errorf("%d tools.exceeded events after a re-listing, want still 1", len(evs))
	}

	// At the limit: nothing to report.
	_, url2 := toolServer(t, tools[:3]...)
	watch2, log2 := newAuditWatch()
	connect(t, httpConfig("srv2", url2), confirmingRegistry(), &Options{MaxTools: 3, Audit: log2})
	if evs := watch2.of(audit.ToolsExceeded); len(evs) != 0 {
		t.Errorf("a server at the limit was reported: %+v", evs)
	}
}
