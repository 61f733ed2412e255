package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolwire/toolwire/tool"
)

func TestSearchToolsRanksNameWordsFirst(t *testing.T) {
	tools := []*tool.Tool{
		{Name: "docs__search", Description: "Search the documentation."},
		{Name: "notes__delete_note", Description: "Deletes the note with the given title."},
		{Name: "notes__list_notes", Description: "Lists saved notes."},
		{Name: "notes__write_note", Description: "Saves a note; replaces any note with the same title."},
		{Name: "trash__empty", Description: "Permanently delete everything in the trash."},
	}
	cases := []struct {
		query string
		limit int
		want  []string
	}{
		{"delete note", 10, []string{"notes__delete_note", "notes__write_note", "notes__list_notes", "trash__empty"}},
		{"delete", 2, []string{"notes__delete_note", "trash__empty"}},
		{"SEARCH docs", 10, []string{"docs__search"}},
		{"weather", 10, nil},
		{"a ; !", 10, nil},
	}
	for _, c := range cases {
		var got []string
		for _, tl := range searchTools(tools, c.query, c.limit) {
			got = append(got, tl.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("search %q = %v, want %v", c.query, got, c.want)
		}
	}
}

func TestToolSetKeepsLoadedToolsWithinTheBudget(t *testing.T) {
	var tools []*tool.Tool
	for i := range 50 {
		tools = append(tools, textTool(fmt.Sprintf("t%02d__op", i), strings.Repeat("word ", 40), tool.Read, ""))
	}
	b := newBench(t, nil, tools...)
	per := EstimateTokens(toolDef(tools[0]))
	meta := EstimateTokens(findToolsDef(FindTools))
	s := toolSet{budget: meta + 3*per}

	defs, isMeta := s.defs(b.reg)
	if !isMeta || len(defs) != 1 || defs[0].Name != FindTools {
		t.Fatalf("defs = %v, want only the meta-tool", names(defs))
	}
	s.load("t01__op", "t02__op", "t03__op", "t04__op")
	defs, _ = s.defs(b.reg)
	if got := names(defs); !slices.Equal(got, []string{FindTools, "t04__op", "t03__op", "t02__op"}) {
		t.Errorf("defs = %v, want the meta-tool and the 3 newest", got)
	}
	// Under the budget, everything goes and no meta-tool.
	s = toolSet{budget: 50*per + 1}
	if defs, isMeta := s.defs(b.reg); isMeta || len(defs) != 50 {
		t.Errorf("under budget: %d defs, meta %v", len(defs), isMeta)
	}
}

func TestMetaToolYieldsItsNameToARegisteredTool(t *testing.T) {
	b := newBench(t, nil, textTool(FindTools, "", tool.Read, ""))
	if got := metaName(b.reg); got != FindToolsAlt {
		t.Errorf("meta-tool name = %q, want %q", got, FindToolsAlt)
	}
}

func names(defs []ToolDef) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func FuzzCutText(f *testing.F) {
	f.Add("hello world", "second part", 5)
	f.Add(strings.Repeat("é", 100), "ü", 7)
	f.Add("", "", 0)
	f.Fuzz(func(t *testing.T, a, b string, budget int) {
		if budget < 0 || budget > 1<<16 {
			return
		}
		in := ToolResult{Parts: []Part{{Text: a}, {Text: "[image]", Image: &tool.Image{}}, {Text: b}}}
		out := cutText(in, budget)
		total := len(a) + len(b)
		if total <= budget {
			if !slices.EqualFunc(out.Parts, in.Parts, func(x, y Part) bool { return x.Text == y.Text }) {
				t.Fatalf("text within budget changed: %v", out.Parts)
			}
			return
		}
		kept := 0
		images := 0
		for _, p := range out.Parts[:len(out.Parts)-1] {
			if p.Image != nil {
				images++
				continue
			}
			kept += len(strings.Replace(p.Text, "\n…[cut]…\n", "", 1))
			if utf8.ValidString(a) && utf8.ValidString(b) && !utf8.ValidString(p.Text) {
				t.Fatalf("cut split a character: %q", p.Text)
			}
		}
		if kept > budget {
			t.Fatalf("kept %d bytes of text, budget %d", kept, budget)
		}
		if images != 1 {
			t.Fatalf("the image was dropped")
		}
		if !strings.Contains(out.Parts[len(out.Parts)-1].Text, "result compacted") {
			t.Fatalf("no note of the cut: %v", out.Parts)
		}
	})
}

func TestFindToolsArguments(t *testing.T) {
	var tools []*tool.Tool
	for i := range 30 {
		tools = append(tools, textTool(fmt.Sprintf("notes__op%02d", i), "Works on notes.", tool.Read, ""))
	}
	b := newBench(t, nil, tools...)
	for _, args := range []string{``, `not json`, `{}`, `{"query":"  "}`, `["notes"]`} {
		if text, names, ok := findTools(b.reg, args); ok || names != nil || !strings.Contains(text, `"query" string`) {
			t.Errorf("findTools(%q) = %q, %v, %v; want a refusal naming the query", args, text, names, ok)
		}
	}
	cases := []struct {
		args string
		want int
	}{
		{`{"query":"notes"}`, findToolsDefault},
		{`{"query":"notes","limit":3}`, 3},
		{`{"query":"notes","limit":2.7}`, 2},
		{`{"query":"notes","limit":1000}`, findToolsMax},
		{`{"query":"notes","limit":0}`, findToolsDefault},
	}
	for _, c := range cases {
		_, names, ok := findTools(b.reg, c.args)
		if !ok || len(names) != c.want {
			t.Errorf("findTools(%s) loaded %d tools, want %d", c.args, len(names), c.want)
		}
	}
	if text, names, ok := findTools(b.reg, `{"query":"weather"}`); !ok || names != nil || !strings.Contains(text, `no tool matches "weather"`) {
		t.Errorf("no match: %q, %v, %v", text, names, ok)
	}
}
