package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
	"github.com/toolwire/toolwire/tool"
)

// Stage says what a rule looks at.
type Stage uint8

const (
	// OnCall rules decide whether a call runs, before it is confirmed.
	OnCall Stage = iota
	// OnResult rules decide whether a call's result reaches its caller.
	OnResult
)

// Rule is one rule of a policy, as a configuration file writes it.
type Rule struct {
	// Name names the rule in decisions, refusals and the audit log; it
	// is unique in a policy.
	Name string
	// File and Line say where the rule is written, and WhenLine where
	// its condition is, for the errors that name them; zero when unknown.
	File           string
	Line, WhenLine int
	// Tools are glob patterns (path.Match) over registered tool names;
	// Servers name the servers (a tool's Origin.Source); Tiers the tiers.
	// A rule applies to the tools that every non-empty one of the three
	// selects: with all three empty, to every tool.
	Tools   []string
	Servers []string
	Tiers   []tool.Tier
	// On is what the rule looks at: the call, or its result.
	On Stage
	// When is the rule's condition in CEL; "" means always. It sees
	// caller, tool and args (and, OnResult, result).
	When string
	// Effect is what the rule decides when it matches: Allow, Deny or
	// Ask (OnResult: Allow or Deny, which withholds the result).
	Effect tool.Effect
	// Reason is given to the caller with a refusal or a withheld result.
	Reason string
}

// where returns "file:line: rule NAME" for messages.
func (r *Rule) where(line int) string {
	var b strings.Builder
	switch {
	case r.File != "" && line > 0:
		fmt.Fprintf(&b, "%s:%d: ", r.File, line)
	case line > 0:
		fmt.Fprintf(&b, "line %d: ", line)
	case r.File != "":
		b.WriteString(r.File + ": ")
	}
	fmt.Fprintf(&b, "policy rule %q", r.Name)
	return b.String()
}

// Policy is a compiled set of rules: the [tool.Policy] an executor asks.
// Rules are checked against each tool's input schema the first time the
// tool is seen (see [Policy.Check]), and the compiled programs kept until
// the tool's definition changes. It is safe for concurrent use.
type Policy struct {
	rules    []*compiled
	env      *cel.Env
	revision string

	// bound caches, by tool name, the programs of the rules that apply
	// to the tool as it is now (a changed tool is a new *tool.Tool).
	bound sync.Map // string -> *bound
}

// compiled is a rule parsed (its syntax checked once, whatever the tools).
type compiled struct {
	Rule
	parsed *cel.Ast // nil when When is empty
}

// bound is what the policy has for one tool: its rules' programs, in
// file order, on calls and on results.
type bound struct {
	t      *tool.Tool
	args   *shape
	call   []program
	result []program
}

// program is one rule's condition checked against one tool.
type program struct {
	rule *compiled
	prg  cel.Program // nil: the rule always matches
	err  error       // the rule does not fit the tool: it denies
}

// New compiles rules: each condition is parsed and checked against the
// caller and the tool, with arguments of any shape (they are checked
// against each tool's schema when the tool is known: [Policy.Check]).
// The error joins every problem, each naming the rule's file, line and
// name and saying what is wrong.
func New(rules []Rule) (*Policy, error) {
	env, err := baseEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p := &Policy{env: env}
	var errs []error
	seen := map[string]bool{}
	anyArgs := &shape{kind: mapShape, elem: &shape{kind: dynShape}}
	for i := range rules {
		r := rules[i]
		c := &compiled{Rule: r}
		if err := r.validate(seen); err != nil {
			errs = append(errs, err)
			continue
		}
		if strings.TrimSpace(r.When) != "" {
			ast, iss := env.Parse(r.When)
			if iss.Err() != nil {
				errs = append(errs, r.celError(issuesOf(iss), ""))
				continue
			}
			c.parsed = ast
			if _, err := check(env, c, anyArgs); err != nil {
				errs = append(errs, r.celError(err, ""))
				continue
			}
		}
		p.rules = append(p.rules, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.revision = revision(rules)
	return p, nil
}

// revision is the SHA-256 (hex) of what the rules decide (not where they
// are written), which lasting approvals are bound to: a changed rule
// needs new approvals.
func revision(rules []Rule) string {
	h := sha256.New()
	for _, r := range rules {
		fmt.Fprintf(h, "%q %q %q %q %v %d %q %d %q\n", r.Name, r.Tools, r.Servers, r.Tiers, r.On, r.Effect, r.When, len(r.Reason), r.Reason)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Revision identifies the rules' content (see [tool.Revisioned]).
func (p *Policy) Revision() string { return p.revision }

func (r *Rule) validate(seen map[string]bool) error {
	switch {
	case r.Name == "":
		return fmt.Errorf("%s: a rule needs a name", r.where(r.Line))
	case seen[r.Name]:
		return fmt.Errorf("%s: another rule has this name", r.where(r.Line))
	}
	seen[r.Name] = true
	for _, g := range r.Tools {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%s: tools: pattern %q: %v", r.where(r.Line), g, err)
		}
	}
	for _, t := range r.Tiers {
		if !t.Valid() {
			return fmt.Errorf("%s: tiers: %w", r.where(r.Line), tool.ErrInvalidTier)
		}
	}
	switch {
	case r.On == OnCall && (r.Effect == tool.Allow || r.Effect == tool.Deny || r.Effect == tool.Ask):
	case r.On == OnResult && (r.Effect == tool.Allow || r.Effect == tool.Deny):
	case r.On == OnResult:
		return fmt.Errorf("%s: a rule on results may allow or deny (withhold), not %s", r.where(r.Line), r.Effect)
	default:
		return fmt.Errorf("%s: decision must be allow, deny or ask", r.where(r.Line))
	}
	return nil
}

// issue is one thing CEL found wrong with a condition, where it is in the
// condition (line from 1, column from 1; zero when unknown).
type issue struct {
	line, col int
	msg       string
}

// issues is a condition's problems, as check returns them.
type issues []issue

func (is issues) Error() string {
	msgs := make([]string, len(is))
	for i, x := range is {
		msgs[i] = x.msg
	}
	return strings.Join(msgs, "; ")
}

func issuesOf(iss *cel.Issues) issues {
	var out issues
	for _, e := range iss.Errors() {
		out = append(out, issue{line: e.Location.Line(), col: e.Location.Column() + 1, msg: e.Message})
	}
	if len(out) == 0 {
		out = issues{{msg: strings.TrimSpace(iss.Err().Error())}}
	}
	return out
}

// celError locates what is wrong with r's condition: one error per
// problem, at its line in the file (the condition's, plus the line inside
// a condition written over several), naming tool when it is about one.
func (r *Rule) celError(err error, toolName string) error {
	is, ok := err.(issues)
	if !ok {
		is = issues{{msg: err.Error()}}
	}
	errs := make([]error, len(is))
	for i, x := range is {
		line := r.WhenLine
		if line > 0 && x.line > 1 {
			line += x.line - 1
		}
		msg := x.msg
		if x.col > 0 {
			msg = fmt.Sprintf("%s (column %d)", msg, x.col)
		}
		if toolName != "" {
			errs[i] = &FitError{Rule: r.Name, Tool: toolName, Where: r.where(line), Err: errors.New(msg)}
		} else {
			errs[i] = fmt.Errorf("%s: when: %s", r.where(line), msg)
		}
	}
	return errors.Join(errs...)
}

// check checks c's condition against args of the given shape and returns
// its program, or what is wrong (without saying where: the caller does).
func check(base *cel.Env, c *compiled, args *shape) (cel.Program, error) {
	env, err := toolEnv(base, args, c.On == OnResult)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Check(c.parsed)
	if iss.Err() != nil {
		return nil, issuesOf(iss)
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, issues{{msg: fmt.Sprintf("the condition is a %s, not a bool", t)}}
	}
	return env.Program(ast, cel.CostLimit(costLimit))
}

// Rules returns the rules as given to New.
func (p *Policy) Rules() []Rule {
	out := make([]Rule, len(p.rules))
	for i, c := range p.rules {
		out[i] = c.Rule
	}
	return out
}

// Applies reports whether r applies to t.
func (r *Rule) Applies(t *tool.Tool) bool {
	if len(r.Tools) > 0 && !slices.ContainsFunc(r.Tools, func(g string) bool { ok, _ := path.Match(g, t.Name); return ok }) {
		return false
	}
	if len(r.Servers) > 0 && !slices.Contains(r.Servers, t.Origin.Source) {
		return false
	}
	if len(r.Tiers) > 0 && !slices.Contains(r.Tiers, t.Tier) {
		return false
	}
	return true
}

// bind returns what the policy has for t, checking its rules against t's
// schema the first time t is seen.
func (p *Policy) bind(t *tool.Tool) *bound {
	if v, ok := p.bound.Load(t.Name); ok {
		if b := v.(*bound); b.t == t {
			return b
		}
	}
	b := &bound{t: t, args: argsShape(t.InputSchema)}
	for _, c := range p.rules {
		if !c.Applies(t) {
			continue
		}
		pr := program{rule: c}
		if c.parsed != nil {
			prg, err := check(p.env, c, b.args)
			if err != nil {
				pr.err = c.celError(err, t.Name)
			}
			pr.prg = prg
		}
		if c.On == OnResult {
			b.result = append(b.result, pr)
		} else {
			b.call = append(b.call, pr)
		}
	}
	p.bound.Store(t.Name, b)
	return b
}

// FitError is a rule that does not fit a tool it applies to: its
// condition reads an argument the tool's input schema does not declare,
// or reads one as the wrong type.
type FitError struct {
	Rule, Tool string
	Where      string // "file:line: policy rule NAME"
	Err        error  // what is wrong, as CEL's checker says it
}

func (e *FitError) Error() string {
	return fmt.Sprintf("%s: when: does not fit tool %q: %v", e.Where, e.Tool, e.Err)
}

func (e *FitError) Unwrap() error { return e.Err }

// fitMessages returns what is wrong in the FitErrors err joins, without
// where (the refusal names the rule already).
func fitMessages(err error) string {
	var msgs []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if fe, ok := e.(*FitError); ok {
				msgs = append(msgs, fe.Err.Error())
			}
		}
	}
	if len(msgs) == 0 {
		return err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Check checks every rule against each of tools it applies to and
// returns, per rule in file order, the names of those tools, and the
// problems found: a rule that reads an argument a tool's schema does not
// declare, or reads it as the wrong type, with the rule's file, line and
// name, the tool, and what is wrong. A tool the check fails for is
// refused by that rule at every call ([tool.ReasonPolicy]) until the
// tool or the rule changes.
func (p *Policy) Check(tools []*tool.Tool) (applied map[string][]string, err error) {
	applied = make(map[string][]string, len(p.rules))
	var errs []error
	for _, c := range p.rules {
		applied[c.Name] = []string{}
	}
	for _, t := range tools {
		b := p.bind(t)
		for _, pr := range append(slices.Clip(b.call), b.result...) {
			applied[pr.rule.Name] = append(applied[pr.rule.Name], t.Name)
			if j, ok := pr.err.(interface{ Unwrap() []error }); ok {
				errs = append(errs, j.Unwrap()...)
			} else if pr.err != nil {
				errs = append(errs, pr.err)
			}
		}
	}
	for _, names := range applied {
		slices.Sort(names)
	}
	return applied, errors.Join(errs...)
}

// Decide implements [tool.Policy]: the first rule on calls that applies
// to t and whose condition holds decides. A rule whose condition fails
// to evaluate (it reads an argument this call lacks) denies, saying why.
func (p *Policy) Decide(ctx context.Context, c tool.PolicyCall) tool.Decision {
	b := p.bind(c.Tool)
	if len(b.call) == 0 {
		return tool.Decision{}
	}
	return p.first(ctx, b, b.call, c, nil)
}

// Withhold implements [tool.Policy]: the first rule on results that
// applies to t and whose condition holds decides; Deny withholds res.
func (p *Policy) Withhold(ctx context.Context, c tool.PolicyCall, res *tool.Result) tool.Decision {
	b := p.bind(c.Tool)
	if len(b.result) == 0 {
		return tool.Decision{}
	}
	return p.first(ctx, b, b.result, c, res)
}

func (p *Policy) first(ctx context.Context, b *bound, prs []program, c tool.PolicyCall, res *tool.Result) tool.Decision {
	vars := map[string]any{"caller": callerOf(ctx), "tool": toolOf(b.t)}
	var act interpreter.Activation // made once the arguments are decoded, for every rule after
	for _, pr := range prs {
		r := pr.rule
		if pr.err != nil {
			return tool.Decision{Effect: tool.Deny, Rule: r.Name, Reason: fmt.Sprintf("the rule does not fit this tool, so it denies: %v", fitMessages(pr.err))}
		}
		if pr.prg == nil {
			return decision(r)
		}
		if act == nil {
			args, err := decodeArgs(c, b.args)
			if err != nil {
				return tool.Decision{Effect: tool.Deny, Rule: r.Name, Reason: err.Error()}
			}
			vars["args"] = args
			if res != nil {
				vars["result"] = resultOf(res)
			}
			if act, err = interpreter.NewActivation(vars); err != nil {
				return tool.Decision{Effect: tool.Deny, Rule: r.Name, Reason: err.Error()}
			}
		}
		out, _, err := pr.prg.Eval(act)
		if err != nil {
			return tool.Decision{Effect: tool.Deny, Rule: r.Name, Reason: fmt.Sprintf("the rule could not be evaluated for this call, so it denies: %v", err)}
		}
		match, ok := out.Value().(bool)
		if !ok {
			return tool.Decision{Effect: tool.Deny, Rule: r.Name, Reason: fmt.Sprintf("the rule's condition gave %s, not a bool, so it denies", out.Type())}
		}
		if match {
			return decision(r)
		}
	}
	return tool.Decision{}
}

func decision(r *compiled) tool.Decision {
	return tool.Decision{Effect: r.Effect, Rule: r.Name, Reason: r.Reason}
}

// decodeArgs returns a call's validated arguments as the rules see them,
// from the executor's decoding when it gave it.
func decodeArgs(c tool.PolicyCall, sh *shape) (map[string]any, error) {
	out := map[string]any{}
	v := c.Decoded
	if v == nil && len(c.Args) > 0 {
		dec := json.NewDecoder(bytes.NewReader(c.Args))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("policy: arguments: %v", err)
		}
	}
	for k, e := range v {
		out[k] = sh.field(k).value(e)
	}
	return out, nil
}

// callerOf is the caller as rules see it.
func callerOf(ctx context.Context) map[string]any {
	c := map[string]any{"subject": tool.IdentityFrom(ctx), "issuer": "", "role": "", "credential": "none", "claims": map[string]any{}}
	if pr, ok := tool.PrincipalFrom(ctx); ok {
		c["subject"], c["issuer"], c["role"] = pr.Subject, pr.Issuer, pr.Role
		if pr.Credential != "" {
			c["credential"] = pr.Credential
		}
		if pr.Claims != nil {
			c["claims"] = pr.Claims
		}
	}
	return c
}

// toolOf is the tool as rules see it.
func toolOf(t *tool.Tool) map[string]any {
	pin := string(t.Pin)
	if pin == "" {
		pin = "off"
	}
	src := string(t.TierSource)
	return map[string]any{
		"name": t.Name, "server": t.Origin.Source, "upstream": t.Origin.Name,
		"tier": t.Tier.String(), "tierSource": src, "pin": pin,
	}
}

// resultOf is a result as rules see it: its text (every text block and
// embedded text resource, joined by newlines), its structured value and
// whether it is an error.
func resultOf(res *tool.Result) map[string]any {
	var texts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *tool.Text:
			texts = append(texts, c.Text)
		case *tool.Resource:
			if c.Text != "" {
				texts = append(texts, c.Text)
			}
		}
	}
	return map[string]any{"text": strings.Join(texts, "\n"), "structured": res.Structured, "isError": res.IsError}
}

var _ tool.Policy = (*Policy)(nil)
