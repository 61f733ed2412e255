package config

import "strings"

var (
	policyFields     = []string{"rules"}
	policyRuleFields = []string{"name", "tools", "servers", "tiers", "on", "when", "decision", "reason"}
)

// Policy is the "policy" section: rules in CEL that decide on each call
// beyond its tool's tier (see docs/policy.md). The file gives each rule's
// shape; package policy compiles and checks the conditions.
type Policy struct {
	File  string // the file the section is in, for errors that name it
	Line  int    // of the "policy" key
	Rules []PolicyRule
}

// PolicyRule is one rule as written.
type PolicyRule struct {
	Name string
	// Line is the line of the rule's entry; WhenLine the line where its
	// condition's text starts (0 without one).
	Line, WhenLine int
	// Tools are glob patterns over registered tool names, Servers server
	// names, Tiers tier names; each empty one selects every tool.
	Tools, Servers, Tiers []string
	// On is "call" or "result".
	On string
	// When is the CEL condition; "" means always.
	When string
	// Decision is "allow", "deny" or "ask".
	Decision string
	// Reason is given to the caller with a refusal.
	Reason string
}

// policy reads the "policy" section.
func (d *decoder) policy(kv pair) *Policy {
	const path = "policy"
	v := kv.value
	if !d.wantMap(v, path, "a map with rules") {
		return nil
	}
	p := &Policy{File: d.name, Line: kv.keyLine}
	for _, e := range d.entries(v, path) {
		switch e.key {
		case "rules":
			p.Rules = d.policyRules(e.value, joinPath(path, "rules"))
		default:
			d.unknownField(e, path, policyFields)
		}
	}
	return p
}

func (d *decoder) policyRules(v *node, path string) []PolicyRule {
	if v.kind != listNode {
		d.mismatch(v, path, "a list of rules")
		return nil
	}
	out := make([]PolicyRule, 0, len(v.items))
	for i, item := range v.items {
		rpath := indexPath(path, i)
		if !d.wantMap(item, rpath, "a rule (a map with name, when and decision)") {
			continue
		}
		r := PolicyRule{Line: item.line, On: "call"}
		for _, f := range d.entries(item, rpath) {
			fpath := joinPath(rpath, f.key)
			switch f.key {
			case "name":
				if s, ok := d.nonEmpty(f.value, fpath); ok {
					r.Name = s
				}
			case "tools":
				r.Tools, _ = d.strList(f.value, fpath, true)
				for j, g := range r.Tools {
					if _, err := matchGlob(g); err != nil {
						d.errorf(f.value.items[j].line, indexPath(fpath, j), "invalid pattern %q: %v (want path.Match syntax: *, ?, [a-z])", g, err)
					}
				}
			case "servers":
				r.Servers, _ = d.strList(f.value, fpath, true)
			case "tiers":
				r.Tiers, _ = d.strList(f.value, fpath, true)
				for j, t := range r.Tiers {
					switch t {
					case "read", "write", "destructive":
					default:
						d.errorf(f.value.items[j].line, indexPath(fpath, j), "unknown tier %q (want read, write or destructive)", t)
					}
				}
			case "on":
				if s, ok := d.choice(f.value, fpath, "stage", `"call" or "result"`, "call", "result"); ok {
					r.On = s
				}
			case "when":
				if s, ok := d.str(f.value, fpath, "a CEL condition (a string)"); ok {
					r.When, r.WhenLine = s, f.value.line
					if f.value.block {
						r.WhenLine++
					}
				}
			case "decision":
				if s, ok := d.choice(f.value, fpath, "decision", `"allow", "deny" or "ask"`, "allow", "deny", "ask"); ok {
					r.Decision = s
				}
			case "reason":
				if s, ok := d.str(f.value, fpath, "a string"); ok {
					r.Reason = strings.TrimSpace(s)
				}
			default:
				d.unknownField(f, rpath, policyRuleFields)
			}
		}
		if r.Name == "" && !hasKey(item, "name") {
			d.errorf(item.line, rpath, "a rule needs a name")
		}
		if r.Decision == "" && !hasKey(item, "decision") {
			d.errorf(item.line, rpath, `a rule needs a decision: "allow", "deny" or "ask"`)
		}
		if r.On == "result" && r.Decision == "ask" {
			d.errorf(item.line, joinPath(rpath, "decision"), `a rule on results may allow or deny (withhold the result), not ask`)
		}
		out = append(out, r)
	}
	for i := range out {
		for j := range i {
			if out[i].Name != "" && out[i].Name == out[j].Name {
				d.errorf(out[i].Line, joinPath(indexPath(path, i), "name"), "duplicate rule name %q (first on line %d)", out[i].Name, out[j].Line)
			}
		}
	}
	return out
}
