package mcpclient

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// maxNameLen is the longest registered name LLM providers accept.
const maxNameLen = 64

// Skipped is a tool of the server's listing that was left out, and why.
type Skipped struct {
	Name   string // the server's own name for the tool
	Reason string
}

// adaptation is the outcome of adapting one server's listing.
type adaptation struct {
	tools    []*tool.Tool
	skipped  []Skipped
	warnings []string
}

// tiers is a server's tier policy, parsed once.
type tiers struct {
	def       tool.Tier
	defSource tool.TierSource // whether the operator chose def
	overrides map[string]tool.Tier
}

func parseTiers(cfg config.Server) (tiers, error) {
	p := tiers{def: tool.Read, defSource: tool.TierDefault, overrides: make(map[string]tool.Tier, len(cfg.TierOverrides))}
	if cfg.DefaultTier != "" {
		t, err := tool.ParseTier(cfg.DefaultTier)
		if err != nil {
			return p, fmt.Errorf("defaultTier: %w", err)
		}
		p.def = t
		if !cfg.DefaultTierImplied {
			p.defSource = tool.TierOperator
		}
	}
	for name, s := range cfg.TierOverrides {
		t, err := tool.ParseTier(s)
		if err != nil {
			return p, fmt.Errorf("tierOverrides.%s: %w", name, err)
		}
		p.overrides[name] = t
	}
	return p, nil
}

// resolve returns the tier of the server's tool t: the operator's override
// or default, raised to destructive when the server itself says the tool is
// destructive. A server's hints can only make a tool more guarded: a
// readOnlyHint never lowers what the operator chose.
func (p tiers) resolve(t *mcp.Tool) tool.Tier {
	tier, _ := p.decide(t)
	return tier
}

// source says where resolve's tier for t came from.
func (p tiers) source(t *mcp.Tool) tool.TierSource {
	_, src := p.decide(t)
	return src
}

func (p tiers) decide(t *mcp.Tool) (tool.Tier, tool.TierSource) {
	tier, ok := p.overrides[t.Name]
	src := tool.TierOverride
	if !ok {
		tier, src = p.def, p.defSource
	}
	if a := t.Annotations; a != nil && a.DestructiveHint != nil && *a.DestructiveHint && tier < tool.Destructive {
		tier, src = tool.Destructive, tool.TierHint
	}
	return tier, src
}

// adapt turns a server's tool listing into registry tools. taken reports
// names already in use elsewhere; handler builds the handler that calls the
// server's tool by its original name. Tools are filtered by onlyTools and
// excludeTools, named <prefix>__<tool> (sanitized, capped, suffixed on
// collision), tiered, and have their schemas compiled; a tool whose schema
// does not compile is skipped, not fatal.
func adapt(cfg config.Server, listing []*mcp.Tool, taken func(string) bool, handler func(original string) tool.Handler) (adaptation, error) {
	var out adaptation
	policy, err := parseTiers(cfg)
	if err != nil {
		return out, err
	}
	prefix := prefixOf(cfg)
	listed := make(map[string]bool, len(listing))

	// First pass: filter and build the tools, in listing order; entries
	// that cannot become tools carry the reason instead.
	type entry struct {
		t    *tool.Tool
		skip *Skipped
	}
	var entries []entry
	var cands []*tool.Tool
	for _, mt := range listing {
		if mt == nil {
			continue
		}
		listed[mt.Name] = true
		if !selected(cfg, mt.Name) {
			continue
		}
		if mt.Name == "" {
			entries = append(entries, entry{skip: &Skipped{Name: "", Reason: "the server listed a tool with no name"}})
			continue
		}
		schema, err := inputSchema(mt)
		if err != nil {
			entries = append(entries, entry{skip: &Skipped{Name: mt.Name, Reason: err.Error()}})
			continue
		}
		t := &tool.Tool{
			Name:        mt.Name, // the registered name is chosen below
			Description: describe(mt, cfg.Name),
			InputSchema: schema,
			Tier:        policy.resolve(mt),
			TierSource:  policy.source(mt),
			Origin:      tool.Origin{Source: cfg.Name, Name: mt.Name},
			Handler:     handler(mt.Name),
		}
		entries = append(entries, entry{t: t})
		cands = append(cands, t)
	}
	compileErrs := compileAll(cands)

	// Second pass, in listing order: skip what did not compile, so that a
	// broken tool does not take a name, and name the rest.
	next := 0
	for _, e := range entries {
		if e.skip != nil {
			out.skipped = append(out.skipped, *e.skip)
			continue
		}
		t, err := e.t, compileErrs[next]
		next++
		if err != nil {
			reason := strings.TrimPrefix(err.Error(), fmt.Sprintf("tool %q: ", t.Name))
			out.skipped = append(out.skipped, Skipped{Name: t.Origin.Name, Reason: reason})
			continue
		}
		out.tools = append(out.tools, t)
	}
	assignNames(prefix, out.tools, taken)
	out.warnings = unmatched(cfg, listed)
	return out, nil
}

// assignNames gives each tool its registered name, in order: the first tool
// to want a name gets it, later ones a numeric suffix. Names taken reports
// as in use elsewhere are avoided too.
func assignNames(prefix string, tools []*tool.Tool, taken func(string) bool) {
	used := make(map[string]bool, len(tools))
	isTaken := func(name string) bool { return used[name] || (taken != nil && taken(name)) }
	for _, t := range tools {
		t.Name = registeredName(prefix, t.Origin.Name, isTaken)
		used[t.Name] = true
	}
}

// prefixOf is the server's tool-name prefix: configured, or its name.
func prefixOf(cfg config.Server) string {
	if cfg.Prefix != "" {
		return cfg.Prefix
	}
	return cfg.Name
}

// compileAll compiles the tools' schemas on every core: compiling is most of
// the cost of adapting a large listing. errs[i] is tools[i]'s error.
func compileAll(tools []*tool.Tool) []error {
	errs := make([]error, len(tools))
	workers := min(runtime.GOMAXPROCS(0), len(tools)/8+1)
	if workers <= 1 {
		for i, t := range tools {
			errs[i] = t.CompileSchema()
		}
		return errs
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(tools); i = int(next.Add(1) - 1) {
				errs[i] = tools[i].CompileSchema()
			}
		}()
	}
	wg.Wait()
	return errs
}

// selected applies onlyTools (nil means all; an empty list means none) and
// then excludeTools.
func selected(cfg config.Server, name string) bool {
	if cfg.OnlyTools != nil && !slices.Contains(cfg.OnlyTools, name) {
		return false
	}
	return !slices.Contains(cfg.ExcludeTools, name)
}

// unmatched warns about configured tool names the server does not list: a
// typo in tierOverrides would otherwise leave a tool at the default tier
// without a word.
func unmatched(cfg config.Server, listed map[string]bool) []string {
	var warnings []string
	check := func(field string, names []string) {
		for _, n := range names {
			if !listed[n] {
				warnings = append(warnings, fmt.Sprintf("server %q: %s names tool %q, which the server does not list", cfg.Name, field, n))
			}
		}
	}
	check("onlyTools", cfg.OnlyTools)
	check("excludeTools", cfg.ExcludeTools)
	overrides := make([]string, 0, len(cfg.TierOverrides))
	for n := range cfg.TierOverrides {
		overrides = append(overrides, n)
	}
	slices.Sort(overrides)
	check("tierOverrides", overrides)
	return warnings
}

// inputSchema returns the tool's input schema as JSON; a tool that declares
// none takes any object.
func inputSchema(t *mcp.Tool) (json.RawMessage, error) {
	if t.InputSchema == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if raw, ok := t.InputSchema.(json.RawMessage); ok {
		return raw, nil
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema cannot be encoded: %v", err)
	}
	return raw, nil
}

// describe is the description the registry shows: the server's own text
// (see shownText; prepare has cut it to the size limit), attributed to the
// server so a reader knows whose words they are.
func describe(t *mcp.Tool, server string) string {
	d := shownText(t)
	if d == "" {
		return fmt.Sprintf("Tool %q of MCP server %q.", t.Name, server)
	}
	return fmt.Sprintf("%s (from MCP server %q)", d, server)
}

// sanitize replaces every character outside [A-Za-z0-9_-] with '_'.
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// registeredName builds <prefix>__<name>, sanitized and capped at 64
// characters; when that is taken it appends _2, _3, … (cutting the base so
// the suffix still fits).
func registeredName(prefix, name string, taken func(string) bool) string {
	base := sanitize(name)
	if prefix != "" {
		base = sanitize(prefix) + "__" + base
	}
	base = capLen(base, maxNameLen)
	if !taken(base) {
		return base
	}
	for n := 2; ; n++ {
		suffix := "_" + strconv.Itoa(n)
		candidate := capLen(base, maxNameLen-len(suffix)) + suffix
		if !taken(candidate) {
			return candidate
		}
	}
}

// capLen cuts an ASCII string to at most n bytes; sanitized names are ASCII.
func capLen(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
