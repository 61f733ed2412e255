package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/policy"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/tool"
)

// ErrPolicy is wrapped by the error of [Open] and [Workspace.Reload] when
// the configuration's policy rules do not compile, or do not fit the tools
// they apply to (a rule reads an argument a tool's schema lacks).
var ErrPolicy = errors.New("policy rules")

// Policy compiles the configuration's policy section ([policy.New]): nil
// and no error when it has no rules. The error joins every rule's
// problems, each naming the file, line and rule.
func Policy(file *config.File) (*policy.Policy, error) {
	if file.Policy == nil || len(file.Policy.Rules) == 0 {
		return nil, nil
	}
	configured := map[string]bool{}
	for _, s := range file.Servers {
		configured[s.Name] = true
	}
	var unknown []error
	rules := make([]policy.Rule, 0, len(file.Policy.Rules))
	for _, r := range file.Policy.Rules {
		// A misspelt server would make a rule that never matches.
		for _, name := range r.Servers {
			if !configured[name] {
				unknown = append(unknown, fmt.Errorf("%s:%d: policy rule %q: servers: no server %q is configured", file.Policy.File, r.Line, r.Name, name))
			}
		}
		pr := policy.Rule{
			Name: r.Name, File: file.Policy.File, Line: r.Line, WhenLine: r.WhenLine,
			Tools: r.Tools, Servers: r.Servers, When: r.When, Reason: r.Reason,
		}
		for _, t := range r.Tiers {
			tier, err := tool.ParseTier(t)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: policy rule %q: tiers: %w", file.Policy.File, r.Line, r.Name, err)
			}
			pr.Tiers = append(pr.Tiers, tier)
		}
		if r.On == "result" {
			pr.On = policy.OnResult
		}
		switch r.Decision {
		case "allow":
			pr.Effect = tool.Allow
		case "deny":
			pr.Effect = tool.Deny
		case "ask":
			pr.Effect = tool.Ask
		}
		rules = append(rules, pr)
	}
	p, err := policy.New(rules)
	if err != nil || len(unknown) > 0 {
		return nil, &marked{errors.Join(append(unknown, err)...), ErrPolicy}
	}
	return p, nil
}

// checkPolicy checks p's rules against the registry's tools; nil p
// checks nothing.
func (w *Workspace) checkPolicy(p *policy.Policy) error {
	if p == nil {
		return nil
	}
	applied, err := p.Check(w.registry.List())
	if err != nil {
		return &marked{err, ErrPolicy}
	}
	for _, r := range p.Rules() {
		if len(applied[r.Name]) == 0 {
			w.logger.Warn(fmt.Sprintf("%s:%d: policy rule %q applies to no tool the servers list now", r.File, r.Line, r.Name))
		}
	}
	return nil
}

// watchPolicy reports, whenever the registry's tools change (a server
// listed new tools), the rules that do not fit them: the calls those
// rules apply to are denied until the tool or the rule changes.
func (w *Workspace) watchPolicy() (stop func()) {
	return w.registry.Watch(func() {
		p, _ := w.executor.Policy().(*policy.Policy)
		if p == nil {
			return
		}
		if _, err := p.Check(w.registry.List()); err != nil {
			w.logger.Error("policy rules do not fit the tools now listed; the calls they apply to are denied", "error", err.Error())
		}
	})
}

// ApprovalsFile is the name of the file of lasting approvals, beside the
// pins file of a files store; PendingFile the name of the file of the
// calls waiting for an operator, beside it.
const (
	ApprovalsFile = "approvals.json"
	PendingFile   = "approvals-pending.json"
)

// ApprovalsOf returns the lasting approvals st keeps, as a workspace on it
// consults them: on files, the file beside its pins file; on PostgreSQL,
// the fleet's table; nil when st keeps none.
func ApprovalsOf(st *store.Store) approval.Grants {
	if st.Kind() == store.Postgres {
		return st.Approvals()
	}
	dir := beside(st)
	if dir == "" {
		return nil
	}
	return approval.NewFiles(filepath.Join(dir, ApprovalsFile))
}

// beside is the directory of a files store's pins file, where its
// approval files are kept; "" for another store, or one without a file.
func beside(st *store.Store) string {
	if st.Kind() != store.Files || st.Pins() == nil || st.Pins().Path() == "" {
		return ""
	}
	return filepath.Dir(st.Pins().Path())
}

// PendingOf returns the queue of calls waiting for an operator that st
// keeps, whose lasting decisions are granted in grants (ApprovalsOf(st)):
// on files, the file beside the approvals file, shared by the processes
// of the machine; on PostgreSQL, the fleet's table, which the replica
// holding a call hears a decision in at once (NOTIFY); nil when st keeps
// none.
func PendingOf(st *store.Store, grants approval.Grants) approval.Queue {
	if st.Kind() == store.Postgres {
		return st.Pending() // grants are st's own, in the same transaction
	}
	dir := beside(st)
	if dir == "" {
		return nil
	}
	host, _ := os.Hostname()
	return approval.NewFileQueue(filepath.Join(dir, PendingFile), grants, fmt.Sprintf("%s:%d", host, os.Getpid()))
}

// Approvals returns the lasting approvals the executor consults before it
// asks its confirmer, for a confirmer that grants them and the commands
// that list and revoke them; nil when the store keeps none.
func (w *Workspace) Approvals() approval.Grants { return w.approvals }

// Pending returns the calls waiting for an operator's decision, for the
// gateway that submits them and the operator's tools (the console,
// toolwire approvals pending) that decide them; nil when the store keeps
// none.
func (w *Workspace) Pending() approval.Queue { return w.pending }

// setOperators gives the approver the lasting approvals, the queue and
// gwc's operator settings; the webhook's secret is masked wherever the
// workspace's logs and audit go.
func (w *Workspace) setOperators(gwc *config.Gateway) error {
	ops, err := w.operators(gwc)
	if err != nil {
		return err
	}
	w.applyOperators(ops)
	return nil
}

// operators are gwc's operator settings, with Options.OperatorWait in
// place of its wait.
func (w *Workspace) operators(gwc *config.Gateway) (gateway.Operators, error) {
	ops, err := Operators(gwc, w.approvals, w.pending, w.lookupEnv)
	if w.operatorWait != nil {
		ops.Wait = *w.operatorWait
	}
	return ops, err
}

// applyOperators makes ops the approver's.
func (w *Workspace) applyOperators(ops gateway.Operators) {
	if ops.Webhook != nil {
		w.secrets.Add(string(ops.Webhook.Secret))
	}
	ops.Logger = w.logger
	w.approver.SetOperators(ops)
}

// endSessions ends the session approvals of the sessions a fleet's
// replicas delete (they are kept in the store then); on one machine a
// session approval lasts its lifetime, bound to an id no later session
// has.
func (w *Workspace) endSessions() {
	if w.store.Kind() != store.Postgres || w.approvals == nil {
		return
	}
	grants := w.approvals
	w.stopSessions = w.store.Sessions().WatchDeleted(func(id string) {
		if id == "" {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = grants.EndSession(ctx, "mcp:"+id)
		}()
	})
}
