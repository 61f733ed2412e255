// Package policy decides on tool calls with rules written in CEL (the
// Common Expression Language of Kubernetes and Envoy): who may call which
// tool, with which arguments, and which results may reach the caller.
//
// A [Policy] is a [tool.Policy]: give it to an executor
// ([tool.ExecutorOptions].Policy) and every call that passed validation is
// decided by the first rule that applies to its tool and whose condition
// holds, in order, before the tool's tier asks for confirmation:
//
//	p, err := policy.New([]policy.Rule{{
//		Name:    "shared-writes-only",
//		Servers: []string{"files"},
//		Tiers:   []tool.Tier{tool.Write, tool.Destructive},
//		When:    `!within(args.path, "/srv/shared")`,
//		Effect:  tool.Deny,
//		Reason:  "files are written under /srv/shared only",
//	}})
//	...
//	if _, err := p.Check(registry.List()); err != nil { ... } // a rule reads what a tool lacks
//	ex := tool.NewExecutor(registry, &tool.ExecutorOptions{Policy: p})
//
// A rule's condition sees caller (subject, issuer, role, credential,
// claims), tool (name, server, upstream, tier, tierSource, pin) and args,
// typed from the tool's input schema: a condition that reads an argument
// the schema does not declare, or reads it as the wrong type, is an error
// of [Policy.Check], never a rule that silently does not match. A
// condition that fails when it runs (an optional argument absent from the
// call) denies the call and says why. docs/policy.md has the language.
package policy
