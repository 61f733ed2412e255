package workspace

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/mcpclient"
)

// madeGateway is a gateway Workspace.Gateway made, with the upstreams its
// caller gave besides the workspace's servers.
type madeGateway struct {
	gw    *gateway.Gateway
	extra []gateway.Upstream
}

// ReloadOptions are what a reload takes besides the configuration: the
// settings a command's flags may have replaced (toolwire serve's limits and
// approvals), settled by the caller against the new configuration.
type ReloadOptions struct {
	// Limits, when set, become every gateway handler's limits.
	Limits *gateway.Limits
	// Approvals, when set, become the approver's policy (when the
	// workspace's confirmer is a [gateway.Approver]); otherwise the new
	// configuration's gateway.approvals do.
	Approvals *gateway.ApprovalPolicy
}

// Reloaded is what [Workspace.Reload] did.
type Reloaded struct {
	Servers mcpclient.Changes
}

// ErrNeedsRestart wraps the reason [Workspace.Reload] refused a
// configuration: it changes something a running process cannot take.
var ErrNeedsRestart = errors.New("needs a restart")

// Reload loads the configuration again with load and applies it to the
// running workspace without ending it (SIGHUP to toolwire serve): servers
// added are started, removed ones stopped, changed ones restarted and the
// rest left exactly as they are (see [mcpclient.Manager.Apply]); the
// gateways' upstreams follow; the gateway section's authentication
// (tokens, JWT), roles, approvals, the policy's rules and, as the options
// load returns give them, limits apply from the next request on. Downstream sessions stay
// open. load returns the configuration and the options a command's flags
// settle against it (nil for none); [config.LoadAll] is the usual loader.
//
// Reload first checks everything it can without changing anything: a
// configuration load refuses (it does not parse, say), policy rules that
// do not compile or do not fit the tools listed now ([ErrPolicy]), a change to what
// the running process cannot take (the store, the audit section, the
// security section, gateway authentication turned on or off, wrapping
// [ErrNeedsRestart]), an authentication that cannot be built (a JWK set
// that cannot be fetched): each is refused and nothing changes, the
// running configuration stays. A server that fails to start is not a
// refusal; it is reported in [Reloaded], like at start. Every reload,
// applied or refused, is audited (config.reloaded).
func (w *Workspace) Reload(ctx context.Context, load func() (*config.File, *ReloadOptions, error)) (*Reloaded, error) {
	w.reloading.Lock()
	defer w.reloading.Unlock()
	file, opts, err := load()
	var done *Reloaded
	if err == nil {
		var o ReloadOptions
		if opts != nil {
			o = *opts
		}
		done, err = w.reload(ctx, file, &o)
	}
	if err != nil {
		w.audit.Record(audit.Event{Kind: audit.ConfigReloaded, Reason: "refused", Error: w.secrets.String(err.Error())})
		return nil, err
	}
	ch := done.Servers
	w.audit.Record(audit.Event{Kind: audit.ConfigReloaded, Added: ch.Added, Removed: ch.Removed, Changed: ch.Changed})
	return done, nil
}

func (w *Workspace) reload(ctx context.Context, file *config.File, o *ReloadOptions) (*Reloaded, error) {
	if file == nil {
		return nil, errors.New("workspace: no configuration")
	}
	w.mu.Lock()
	old, handlers, gateways := w.file, append([]*gateway.Handler(nil), w.handlers...), append([]madeGateway(nil), w.gateways...)
	w.mu.Unlock()
	if err := restartOnly(old, file); err != nil {
		return nil, err
	}
	// Everything that can fail is settled before anything changes.
	auth, err := Authentication(ctx, file.Gateway)
	if err != nil {
		return nil, err
	}
	for _, h := range handlers {
		if h.Authenticated() != (auth.Verifier != nil) {
			return nil, fmt.Errorf("gateway: caller authentication turned %s: %w", onOff(auth.Verifier != nil), ErrNeedsRestart)
		}
	}
	if len(handlers) > 0 {
		// The callbacks of callers' logins are mounted with the handlers.
		w.mu.Lock()
		mounted := w.callbackPaths
		w.mu.Unlock()
		for _, path := range loginCallbackPaths(file) {
			if !mounted[path] {
				return nil, fmt.Errorf("oauth.redirectUrl: a new callback path %s: %w", path, ErrNeedsRestart)
			}
		}
	}
	policy, err := ApprovalPolicy(file.Gateway)
	if err != nil {
		return nil, err
	}
	if o.Approvals != nil {
		policy = *o.Approvals
	}
	var ops gateway.Operators
	if w.approver != nil {
		if ops, err = w.operators(file.Gateway); err != nil {
			return nil, err
		}
	}
	rules, err := Policy(file)
	if err != nil {
		return nil, err
	}
	// Against the tools listed now; those of servers the reload starts
	// are checked when they register (see watchPolicy).
	if err := w.checkPolicy(rules); err != nil {
		return nil, err
	}

	ch, err := w.manager.Apply(ctx, file.Servers)
	if err != nil {
		return nil, err
	}
	if rules != nil {
		w.executor.SetPolicy(rules)
		if err := w.checkPolicy(rules); err != nil {
			w.logger.Error("policy rules do not fit the tools of the servers just started; the calls they apply to are denied", "error", err.Error())
		}
	} else {
		w.executor.SetPolicy(nil)
	}
	for _, g := range gateways {
		g.gw.SetUpstreams(ctx, upstreams(g.extra, w.manager))
	}
	if w.approver != nil {
		w.approver.SetPolicy(policy)
		w.applyOperators(ops)
	}
	for _, h := range handlers {
		ro := gateway.ReloadOptions{Verifier: auth.Verifier, Roles: auth.Roles, Limits: h.Limits()}
		if o.Limits != nil {
			ro.Limits = *o.Limits
		}
		if err := h.Reload(ro); err != nil {
			// Checked above; a handler made meanwhile is the only way here.
			return nil, err
		}
	}
	required := map[string]bool{}
	for _, s := range file.Servers {
		if s.Required && !s.Disabled {
			required[s.Name] = true
		}
	}
	w.mu.Lock()
	w.file, w.required = file, required
	w.mu.Unlock()
	return &Reloaded{Servers: ch}, nil
}

// restartOnly refuses a change to what a running workspace was opened
// with and cannot change: where its state lives, its audit log, its
// security profile (pins, egress, limits on what servers send), and what
// the gateway's listener and metadata were made with.
func restartOnly(old, next *config.File) error {
	var changed []string
	if old.Store != next.Store {
		changed = append(changed, "store")
	}
	if !reflect.DeepEqual(old.Audit, next.Audit) {
		changed = append(changed, "audit")
	}
	if !reflect.DeepEqual(old.Security, next.Security) {
		changed = append(changed, "security")
	}
	// What the listener and the protected-resource metadata were made
	// with (a certificate's files are watched for new contents already).
	var og, ng config.Gateway
	if old.Gateway != nil {
		og = *old.Gateway
	}
	if next.Gateway != nil {
		ng = *next.Gateway
	}
	if og.ResourceURL != ng.ResourceURL || !slices.Equal(og.AuthorizationServers, ng.AuthorizationServers) {
		changed = append(changed, "gateway.resourceURL or authorizationServers")
	}
	if !slices.Equal(og.AllowedOrigins, ng.AllowedOrigins) {
		changed = append(changed, "gateway.allowedOrigins")
	}
	if !reflect.DeepEqual(og.TLS, ng.TLS) {
		changed = append(changed, "gateway.tls")
	}
	if len(changed) == 0 {
		return nil
	}
	return fmt.Errorf("%v changed: %w (the running process keeps its configuration)", changed, ErrNeedsRestart)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
