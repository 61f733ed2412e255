package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/toolwire/toolwire/tool"
)

// DefaultToolBudget is how many tokens the tool definitions of one request
// may cost before the agent switches to the find_tools meta-tool.
const DefaultToolBudget = 8000

// FindTools is the name of the meta-tool a model is given, instead of every
// tool, when the tool definitions exceed the budget. When a registered tool
// already has that name, the meta-tool is called [FindToolsAlt].
const (
	FindTools    = "find_tools"
	FindToolsAlt = "toolwire_find_tools"
)

// findToolsLimit bounds how many tools one find_tools call loads.
const (
	findToolsDefault = 8
	findToolsMax     = 20
)

// EstimateTokens estimates what a tool definition costs in a request, in
// tokens: a quarter of the bytes of its name, description and schema (a
// common rule of thumb for English text and JSON with the providers'
// tokenizers), plus a few tokens of framing. It is an estimate for
// budgeting, not a count: tokenizers differ by model.
func EstimateTokens(d ToolDef) int {
	return (len(d.Name)+len(d.Description)+len(d.Schema))/4 + 8
}

// toolDef is how t is described to a model.
func toolDef(t *tool.Tool) ToolDef {
	return ToolDef{Name: t.Name, Description: t.Description, Schema: t.Schema()}
}

// toolSet decides which tool definitions go into each request of a
// conversation. Under the budget, every registered tool goes; over it, the
// find_tools meta-tool and the tools it (or a direct call) loaded.
type toolSet struct {
	budget int
	loaded []string // most recently loaded last
}

// metaName is the meta-tool's name for reg.
func metaName(reg *tool.Registry) string {
	if reg.Has(FindTools) {
		return FindToolsAlt
	}
	return FindTools
}

// defs returns the definitions to send, and whether the meta-tool is
// among them.
func (s *toolSet) defs(reg *tool.Registry) ([]ToolDef, bool) {
	all := reg.List()
	defs := make([]ToolDef, len(all))
	cost := 0
	for i, t := range all {
		defs[i] = toolDef(t)
		cost += EstimateTokens(defs[i])
	}
	if cost <= s.budget {
		return defs, false
	}
	meta := findToolsDef(metaName(reg))
	out := []ToolDef{meta}
	cost = EstimateTokens(meta)
	// Newest first, so that when loaded tools outgrow the budget the oldest
	// are the ones left out.
	var keep []string
	for i := len(s.loaded) - 1; i >= 0; i-- {
		t, ok := reg.Lookup(s.loaded[i])
		if !ok {
			continue
		}
		d := toolDef(t)
		if c := EstimateTokens(d); cost+c <= s.budget {
			cost += c
			out = append(out, d)
			keep = append(keep, d.Name)
		}
	}
	slices.Reverse(keep)
	s.loaded = keep
	return out, true
}

// load marks names as loaded, most recent last.
func (s *toolSet) load(names ...string) {
	for _, n := range names {
		s.loaded = slices.DeleteFunc(s.loaded, func(m string) bool { return m == n })
		s.loaded = append(s.loaded, n)
	}
}

func findToolsDef(name string) ToolDef {
	return ToolDef{
		Name: name,
		Description: "Search the available tools by keywords and load the best matches, so that you can call them from your next reply. " +
			"Only the tools found so far are listed; call this first whenever you need a tool you do not see.",
		Schema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":"Keywords describing what the tool should do, such as: delete note"},"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"How many tools to load (default %d)."}},"required":["query"]}`,
			findToolsMax, findToolsDefault)),
	}
}

// findTools runs the meta-tool: it parses the arguments, searches the
// registry and returns the result text and the names it loaded. Bad
// arguments are an error result, as for any tool.
func findTools(reg *tool.Registry, args string) (string, []string, bool) {
	var in struct {
		Query string  `json:"query"`
		Limit float64 `json:"limit"`
	}
	if err := json.Unmarshal([]byte(args), &in); err != nil || strings.TrimSpace(in.Query) == "" {
		return `the arguments must be an object with a "query" string of keywords`, nil, false
	}
	limit := findToolsDefault
	if in.Limit >= 1 {
		limit = int(min(in.Limit, findToolsMax))
	}
	found := searchTools(reg.List(), in.Query, limit)
	if len(found) == 0 {
		return fmt.Sprintf("no tool matches %q; try other words", in.Query), nil, true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Loaded %d tool(s); call them from your next reply:\n", len(found))
	names := make([]string, len(found))
	for i, t := range found {
		names[i] = t.Name
		fmt.Fprintf(&b, "- %s (%s): %s\n", t.Name, t.Tier, oneLine(t.Description, 200))
	}
	return strings.TrimSuffix(b.String(), "\n"), names, true
}

// searchTools ranks tools by the query's words: a word found among a tool
// name's words scores 3, inside the name 2, in the description 1. Ties keep
// the registry's (alphabetical) order.
func searchTools(tools []*tool.Tool, query string, limit int) []*tool.Tool {
	words := keywords(query)
	if len(words) == 0 {
		return nil
	}
	type scored struct {
		t     *tool.Tool
		score int
	}
	var hits []scored
	for _, t := range tools {
		name := strings.ToLower(t.Name)
		nameWords := keywords(t.Name)
		desc := strings.ToLower(t.Description)
		score := 0
		for _, w := range words {
			switch {
			case slices.Contains(nameWords, w):
				score += 3
			case strings.Contains(name, w):
				score += 2
			case strings.Contains(desc, w):
				score++
			}
		}
		if score > 0 {
			hits = append(hits, scored{t, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b scored) int { return b.score - a.score })
	out := make([]*tool.Tool, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, h.t)
	}
	return out
}

// keywords splits s into lower-case words of letters and digits, leaving
// out words too short to mean much.
func keywords(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return slices.DeleteFunc(f, func(w string) bool { return len(w) < 2 })
}
