package mcpclient

import (
	"crypto/sha256"
	"encoding/hex"
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

// adapt turns a server's tool listing into registry tools. handler builds
// the handler that calls the server's tool by its original name. Tools are
// filtered by onlyTools and excludeTools, named by registeredName, tiered,
// and have their schemas compiled; a tool whose schema does not compile, or
// whose name another tool of the listing would also get, is skipped, not
// fatal.
func adapt(cfg config.Server, listing []*mcp.Tool, handler func(original string) tool.Handler) (adaptation, error) {
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
		tier, tierSource := policy.decide(mt)
		h := handler(mt.Name)
		if tier == tool.Read && mt.Annotations != nil && mt.Annotations.IdempotentHint {
			h = retrySafe(h)
		}
		t := &tool.Tool{
			Name:        mt.Name, // the registered name is chosen below
			Description: describe(mt, cfg.Name),
			InputSchema: schema,
			Tier:        tier,
			TierSource:  tierSource,
			Origin:      tool.Origin{Source: cfg.Name, Name: mt.Name},
			Handler:     h,
		}
		entries = append(entries, entry{t: t})
		cands = append(cands, t)
	}
	compileErrs := compileAll(cands)

	// Second pass: skip what did not compile, and name the rest.
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
		t.Name = registeredName(prefix, t.Origin.Name)
		out.tools = append(out.tools, t)
	}
	var clashed []Skipped
	out.tools, clashed = dropClashes(prefix, out.tools)
	out.skipped = append(out.skipped, clashed...)
	out.warnings = unmatched(cfg, listed)
	return out, nil
}

// dropClashes leaves out the tools whose registered name another tool of
// the same listing also gets. Names are a function of the tool's own name,
// so a clash is a server listing one name twice, or a name crafted to equal
// another's hashed form (see registeredName). Whichever of them came first
// must not win, or a relisting in another order would move the name: a
// tool whose own name is the registered one as is keeps it, and every
// other claimant is left out.
func dropClashes(prefix string, tools []*tool.Tool) (kept []*tool.Tool, skipped []Skipped) {
	claims := make(map[string][]*tool.Tool, len(tools))
	for _, t := range tools {
		claims[t.Name] = append(claims[t.Name], t)
	}
	for _, t := range tools {
		rivals := claims[t.Name]
		if len(rivals) == 1 {
			kept = append(kept, t)
			continue
		}
		var plain, same int
		for _, r := range rivals {
			if isPlain(prefix, r) {
				plain++
			}
			if r.Origin.Name == t.Origin.Name {
				same++
			}
		}
		switch {
		case same > 1:
			skipped = append(skipped, Skipped{Name: t.Origin.Name, Reason: fmt.Sprintf("the server lists the name %d times, so which tool a call would reach is the server's choice", same)})
		case plain == 1 && isPlain(prefix, t):
			kept = append(kept, t)
		default:
			var others []string
			for _, r := range rivals {
				if r != t {
					others = append(others, strconv.Quote(r.Origin.Name))
				}
			}
			skipped = append(skipped, Skipped{Name: t.Origin.Name, Reason: fmt.Sprintf("its registered name %q is also that of tool %s of the same server", t.Name, strings.Join(others, ", "))})
		}
	}
	return kept, skipped
}

// isPlain reports whether the tool's registered name is its own name
// unchanged after the prefix (no character replaced, nothing cut, no hash).
func isPlain(prefix string, t *tool.Tool) bool {
	return t.Name == nameHead(prefix)+t.Origin.Name
}

// nameHead is what every registered name of a server with this prefix
// starts with.
func nameHead(prefix string) string {
	if prefix == "" {
		return ""
	}
	return sanitize(prefix) + "__"
}

// NameHead returns what the registered name of each tool of the server
// configured as cfg begins with (its prefix, or its name, and "__"),
// except a name cut to 64 characters, which keeps only the first
// [NameHeadKept] characters of it: a command that calls one tool can
// start that tool's server alone.
func NameHead(cfg config.Server) string { return nameHead(prefixOf(cfg)) }

// NameHeadKept is how much of its [NameHead] a registered name cut to
// fit always keeps.
const NameHeadKept = maxNameLen - 9

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
		return nil, fmt.Errorf("input schema cannot be encoded: %w", err)
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

// registeredName is the name a server's tool is registered under. It is a
// function of the prefix and the tool's own name only, never of the order
// of a listing or of what else is registered, so the same upstream tool
// always gets the same name, and approvals, role globs and quarantine that
// name it always mean that tool.
//
// A name made only of [A-Za-z0-9_-] that fits in 64 characters with its
// prefix is kept as is: <prefix>__<name>. Any other name is sanitized
// (each other character becomes '_'), cut, and given '_' and 8 hex digits
// of the SHA-256 of the tool's own name, so that "a.b" and "a_b", or two
// long names alike in their first 64 characters, never share a name:
// "a_b" is <prefix>__a_b and "a.b" is <prefix>__a_b_<hash>.
func registeredName(prefix, name string) string {
	head := nameHead(prefix)
	if sanitize(name) == name && len(head)+len(name) <= maxNameLen {
		return head + name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:4])
	return capLen(head+sanitize(name), maxNameLen-len(suffix)) + suffix
}

// capLen cuts an ASCII string to at most n bytes; sanitized names are ASCII.
func capLen(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
