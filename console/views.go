package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/safetext"
	"github.com/toolwire/toolwire/policy"
	"github.com/toolwire/toolwire/tool"
)

// pageDef is one page of the console: its path (/name), title, the topics
// it shows and how its view is made.
type pageDef struct {
	name, title string
	topics      []string
	view        func(ctx context.Context, c *Console) any
	tmpl        *template.Template
}

// Name and Title are for the navigation.
func (p pageDef) Name() string  { return p.name }
func (p pageDef) Title() string { return p.title }

// Path is where the page is served.
func (p pageDef) Path() string {
	if p.name == "overview" {
		return "/"
	}
	return "/" + p.name
}

var pages = func() []pageDef {
	ps := []pageDef{
		{name: "overview", title: "Overview", topics: []string{topicServers, topicTools, topicSessions, topicApprovals, topicAudit, topicLimits}, view: overviewView},
		{name: "approvals", title: "Approvals", topics: []string{topicApprovals}, view: approvalsView},
		{name: "servers", title: "Servers", topics: []string{topicServers}, view: serversView},
		{name: "tools", title: "Tools", topics: []string{topicTools}, view: toolsView},
		{name: "sessions", title: "Sessions", topics: []string{topicSessions, topicServers}, view: sessionsView},
		{name: "audit", title: "Audit", topics: []string{topicAudit}, view: auditView},
		{name: "limits", title: "Limits", topics: []string{topicLimits}, view: limitsView},
	}
	base := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html"))
	for i := range ps {
		ps[i].tmpl = template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/templates/"+ps[i].name+".html"))
	}
	return ps
}()

var funcs = template.FuncMap{
	// ago says how long ago t was, for a person.
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return human(time.Since(t)) + " ago"
	},
	// in says how long until t.
	"in": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		d := time.Until(t)
		if d <= 0 {
			return "now"
		}
		return "in " + human(d)
	},
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	// clock is t's time of day (UTC), for a tail of today's events; its
	// title has the date.
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("15:04:05")
	},
	// text shows others' words on one line: control characters escaped,
	// cut to n runes (html/template then escapes it for HTML).
	"text":  func(n int, s string) string { return safetext.Line(s, n) },
	"lower": strings.ToLower,
}

func human(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// serverRow is a server on the servers page.
type serverRow struct {
	Name, Transport, State, Protocol, LastError, Sandbox string
	Since                                                time.Time
	Tools, Attempt, PID, CallerSessions                  int
}

func servers(c *Console) []serverRow {
	var rows []serverRow
	for _, st := range c.sources().Workspace.Manager().Status() {
		r := serverRow{Name: st.Name, Transport: string(st.Transport), State: st.State.String(), Protocol: st.Protocol,
			LastError: st.LastError, Since: st.Since, Tools: st.Tools, Attempt: st.Attempt, PID: st.PID, CallerSessions: st.CallerSessions}
		if st.Sandbox != nil {
			r.Sandbox = fmt.Sprint(st.Sandbox)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b serverRow) int { return cmp.Compare(a.Name, b.Name) })
	return rows
}

func serversView(_ context.Context, c *Console) any { return servers(c) }

// toolRow is a tool on the tools page, with the rules that apply to it.
type toolRow struct {
	Name, Server, Original, Tier, TierSource, Pin, Description string
	Rules                                                      []ruleRef
}

type ruleRef struct{ Name, Effect, On, Where string }

type toolsPage struct {
	Tools    []toolRow
	Revision string // of the policy; "" without one
	Rules    int
}

func currentPolicy(c *Console) *policy.Policy {
	p, _ := c.sources().Workspace.Executor().Policy().(*policy.Policy)
	return p
}

func toolsView(_ context.Context, c *Console) any {
	p := currentPolicy(c)
	var rules []policy.Rule
	page := toolsPage{}
	if p != nil {
		rules = p.Rules()
		page.Revision, page.Rules = p.Revision(), len(rules)
	}
	for _, t := range c.sources().Workspace.Registry().List() {
		row := toolRow{Name: t.Name, Server: t.Origin.Source, Original: t.Origin.Name, Tier: t.Tier.String(),
			TierSource: string(t.TierSource), Pin: string(t.Pin), Description: t.Description}
		for i := range rules {
			if rules[i].Applies(t) {
				row.Rules = append(row.Rules, ruleRef{Name: rules[i].Name, Effect: effectName(rules[i].Effect), On: stageName(rules[i].On),
					Where: fmt.Sprintf("%s:%d", rules[i].File, rules[i].Line)})
			}
		}
		page.Tools = append(page.Tools, row)
	}
	slices.SortFunc(page.Tools, func(a, b toolRow) int { return cmp.Compare(a.Name, b.Name) })
	return page
}

func effectName(e tool.Effect) string {
	switch e {
	case tool.Allow:
		return "allow"
	case tool.Deny:
		return "deny"
	case tool.Ask:
		return "ask"
	}
	return "?"
}

func stageName(s policy.Stage) string {
	if s == policy.OnResult {
		return "result"
	}
	return "call"
}

type sessionsPage struct {
	Observed bool // an HTTP gateway reports its sessions
	Callers  []callerSessions
	Total    int
	Upstream []serverRow // servers holding callers' own sessions
}

func sessionsView(_ context.Context, c *Console) any {
	page := sessionsPage{Observed: c.sources().Limits != nil}
	page.Callers, page.Total = c.events.sessions()
	for _, s := range servers(c) {
		if s.CallerSessions > 0 {
			page.Upstream = append(page.Upstream, s)
		}
	}
	return page
}

// waitingRow is a call waiting for an operator, as its form shows it.
type waitingRow struct {
	approval.Request
	Description string // the tool's, the server's words
	ArgsText    string
	Scopes      []scopeChoice
}

type scopeChoice struct{ Value, Label string }

// scopes are the scopes an operator may give a decision, and what each
// covers: a lasting one only for a call whose caller is known (a call of
// an unauthenticated client has nobody a lasting decision could be bound
// to), session only for a call made in a session.
func scopes(r approval.Request) []scopeChoice {
	out := []scopeChoice{{string(approval.Once), "this call only"}}
	if !lastingAllowed(r) {
		return out
	}
	out = append(out, scopeChoice{string(approval.Args), "this tool with exactly these arguments"})
	if r.Session != "" {
		out = append(out, scopeChoice{string(approval.Session), "this tool for this session"})
	}
	return append(out, scopeChoice{string(approval.Tool), "this tool, any arguments"})
}

// lastingAllowed reports whether r may be decided with a lasting scope:
// the executor gave it a key (it does not for a call through a gateway
// without caller authentication).
func lastingAllowed(r approval.Request) bool { return r.Key.Tool != "" }

type grantRow struct {
	ID, Scope, Caller, Tool, Args, Reason string
	Deny                                  bool
	Created, Expires                      time.Time
}

type approvalsPage struct {
	Queue   bool // the store keeps a queue of calls waiting for an operator
	Pending []waitingRow
	Error   string
	Grants  []grantRow
	Lasting bool // the store keeps lasting approvals
}

func approvalsView(ctx context.Context, c *Console) any {
	w := c.sources().Workspace
	q := w.Pending()
	page := approvalsPage{Queue: q != nil}
	if q != nil {
		pending, err := q.Pending(ctx)
		if err != nil {
			page.Error = "The waiting calls could not be read: " + err.Error()
		}
		for _, p := range pending {
			row := waitingRow{Request: p, ArgsText: argsText(p.Args), Scopes: scopes(p)}
			if t, ok := w.Registry().Lookup(p.Tool); ok {
				row.Description = t.Description
			}
			page.Pending = append(page.Pending, row)
		}
	}
	if g := w.Approvals(); g != nil {
		page.Lasting = true
		grants, err := g.List(ctx)
		if err != nil && page.Error == "" {
			page.Error = "The lasting approvals could not be read: " + err.Error()
		}
		for _, gr := range grants {
			args := "any"
			if gr.Key.Args != "" {
				args = "sha256 " + short(gr.Key.Args)
			}
			if gr.Scope == approval.Session {
				args = "any, in session " + short(gr.Session)
			}
			page.Grants = append(page.Grants, grantRow{ID: gr.ID, Scope: string(gr.Scope), Caller: cmp.Or(gr.Key.Caller, "(terminal)"),
				Tool: gr.Key.Tool, Args: args, Deny: gr.Deny, Reason: gr.Reason, Created: gr.Created, Expires: gr.Expires})
		}
	}
	return page
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12] + "…"
	}
	return hash
}

// argsText renders validated arguments for a person: indented JSON,
// control characters escaped, at most 4 KiB.
func argsText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		b.Reset()
		b.Write(raw)
	}
	s := safetext.Escape(b.String())
	if len(s) > 4<<10 {
		s = strings.ToValidUTF8(s[:4<<10], "") + "\n… (cut)"
	}
	return s
}

// auditRow is one event of the audit tail.
type auditRow struct {
	Time                                            time.Time
	Kind, Caller, Tool, Reason, Rule, Error, Detail string
}

type auditPage struct {
	Available bool   // the store has an audit log
	Intact    bool   // its chain verified
	Events    int    // lines verified
	Head      string // the last line's hash
	Problem   string // why the chain is not intact, or the log unreadable
	Tail      []auditRow
}

// auditTail is how many of the latest audit events the audit page shows.
const auditTail = 100

// auditCache keeps the audit page's view for a moment: reading and
// verifying the log is a pass over all of it. An event this process
// writes makes it stale at once; another process's shows within a second.
type auditCache struct {
	mu    sync.Mutex
	at    time.Time
	page  auditPage
	stale atomic.Bool
}

var errStop = errors.New("stop")

func auditView(ctx context.Context, c *Console) any { return c.audit(ctx) }

func (c *Console) audit(ctx context.Context) auditPage {
	c.auditCache.mu.Lock()
	defer c.auditCache.mu.Unlock()
	if !c.auditCache.stale.Swap(false) && time.Since(c.auditCache.at) < time.Second && !c.auditCache.at.IsZero() {
		return c.auditCache.page
	}
	st := c.sources().Workspace.Store()
	var page auditPage
	if st.Audit() == nil {
		c.auditCache.page, c.auditCache.at = page, time.Now()
		return page
	}
	page.Available = true
	rep, err := st.VerifyAudit(ctx, nil)
	page.Events, page.Head = rep.Lines, rep.Head
	switch {
	case errors.Is(err, audit.ErrUnchained):
		page.Problem = "no event is hash-chained: the log was written before toolwire chained it"
	case err != nil:
		page.Problem = safetext.Line(err.Error(), 400)
	default:
		page.Intact = true
	}
	ring := make([]auditRow, 0, auditTail)
	err = st.AuditLines(ctx, func(line []byte) error {
		var ev audit.Event
		row := auditRow{}
		if json.Unmarshal(line, &ev) != nil {
			row.Kind, row.Detail = "(unreadable line)", safetext.Line(string(line), 120)
		} else {
			row = auditRow{Time: ev.Time, Kind: string(ev.Kind), Caller: ev.Caller, Tool: ev.Tool, Reason: ev.Reason, Rule: ev.Rule, Error: ev.Error}
		}
		if len(ring) == auditTail {
			ring = append(ring[:0], ring[1:]...)
		}
		ring = append(ring, row)
		return ctx.Err()
	})
	if err != nil && page.Problem == "" {
		page.Problem = "the log could not be read: " + safetext.Line(err.Error(), 300)
	}
	slices.Reverse(ring)
	page.Tail = ring
	c.auditCache.page, c.auditCache.at = page, time.Now()
	return page
}

// limitRow is one limit: its value and how often it refused.
type limitRow struct {
	Name, Value, Key, Setting string
	Hits                      int
	Last                      time.Time
}

type limitsPage struct {
	Gateway bool // an HTTP gateway enforces limits
	Limits  []limitRow
	Other   []limitRow // refusals by limits the table does not list
	Recent  []refusal
}

func limitsView(_ context.Context, c *Console) any {
	src := c.sources()
	page := limitsPage{Gateway: src.Limits != nil}
	counts, last, recent := c.events.limitHits()
	page.Recent = recent
	if src.Limits != nil {
		l := src.Limits()
		page.Limits = []limitRow{
			{Name: "Sessions", Setting: "maxSessions", Key: gateway.LimitSessions, Value: count(l.MaxSessions)},
			{Name: "Sessions per caller", Setting: "maxSessionsPerCaller", Key: gateway.LimitSessionsPerCaller, Value: count(l.MaxSessionsPerCaller)},
			{Name: "Calls in progress per session", Setting: "maxCallsPerSession", Key: gateway.LimitCallsPerSession, Value: count(l.MaxCallsPerSession)},
			{Name: "Calls in progress per caller", Setting: "maxCallsPerCaller", Key: gateway.LimitCallsPerCaller, Value: count(l.MaxCallsPerCaller)},
			{Name: "Call rate per caller", Setting: "callRate, callBurst", Key: gateway.LimitCallRate, Value: fmt.Sprintf("%g/s, burst %d", l.CallRate, l.CallBurst)},
			{Name: "Listens per caller", Setting: "maxListensPerCaller", Key: gateway.LimitListensPerCaller, Value: count(l.MaxListensPerCaller)},
			{Name: "Resources per listen", Setting: "maxListenResources", Key: gateway.LimitListenResources, Value: count(l.MaxListenResources)},
			{Name: "Session idle timeout", Setting: "sessionIdleTimeout", Value: l.SessionIdleTimeout.String()},
		}
	}
	listed := map[string]bool{}
	for i := range page.Limits {
		k := page.Limits[i].Key
		if k == "" {
			continue
		}
		listed[k] = true
		page.Limits[i].Hits, page.Limits[i].Last = counts[k], last[k]
	}
	for k, n := range counts {
		if !listed[k] {
			page.Other = append(page.Other, limitRow{Name: k, Key: k, Hits: n, Last: last[k]})
		}
	}
	slices.SortFunc(page.Other, func(a, b limitRow) int { return cmp.Compare(a.Key, b.Key) })
	return page
}

func count(n int) string {
	if n <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

type overviewPage struct {
	Servers, Ready, Tools, Sessions, Pending, Refusals int
	Queue, Gateway                                     bool
	Audit                                              auditPage
	Down                                               []serverRow
}

func overviewView(ctx context.Context, c *Console) any {
	var o overviewPage
	for _, s := range servers(c) {
		o.Servers++
		if s.State == "ready" {
			o.Ready++
		} else {
			o.Down = append(o.Down, s)
		}
	}
	o.Tools = c.sources().Workspace.Registry().Len()
	_, o.Sessions = c.events.sessions()
	src := c.sources()
	o.Gateway = src.Limits != nil
	if q := src.Workspace.Pending(); q != nil {
		o.Queue = true
		if p, err := q.Pending(ctx); err == nil {
			o.Pending = len(p)
		}
	}
	counts, _, _ := c.events.limitHits()
	for _, n := range counts {
		o.Refusals += n
	}
	o.Audit = c.audit(ctx)
	o.Audit.Tail = nil
	return o
}
