package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/workspace"
)

// MinTokenLength is the shortest operator token [New] accepts: a token
// anyone who reaches the console could guess is no credential.
const MinTokenLength = 24

// ErrShortToken is wrapped by the error of [New] for an operator token
// shorter than [MinTokenLength].
var ErrShortToken = errors.New("the operator token is too short")

// Options configure a [Console]. Token is required.
type Options struct {
	// Token is the operator's credential, entered on the sign-in page. It
	// must be at least MinTokenLength bytes and differ from every caller's
	// token (the caller of New checks the configured hashes with
	// [SameAsCallerToken]).
	Token string
	// Secure says the browser reaches the console over HTTPS: served
	// with TLS, or behind a proxy that terminates it. The session cookie
	// is then Secure, and the console's own origin, which every POST must
	// name, is https.
	Secure bool
	// Logger receives the console's own events (sign-ins, decisions);
	// nil discards them.
	Logger *slog.Logger
	// SessionIdle and SessionMax bound an operator's session: unused for
	// SessionIdle, or older than SessionMax, it is over. Zero means 1 hour
	// and 12 hours.
	SessionIdle, SessionMax time.Duration
	// Poll is how often the console looks for changes nothing announces
	// (a server's state, the audit file written by another process).
	// Zero means 2 seconds.
	Poll time.Duration
}

// Sources are what the console shows: the workspace (servers, tools,
// policy, audit, the calls waiting for an operator and the lasting
// approvals) and what the HTTP gateway alone knows.
type Sources struct {
	// Workspace is required.
	Workspace *workspace.Workspace
	// Limits returns the gateway's limits now ([gateway.Handler.Limits]);
	// nil when there is no HTTP gateway (serve --stdio).
	Limits func() gateway.Limits
}

// Console is the operator console: its sessions, what it has seen of the
// gateway, and the pages. Its methods are safe for concurrent use.
type Console struct {
	opts   Options
	log    *slog.Logger
	hub    *hub
	auth   *sessions
	events *observed
	// auditCache keeps the audit page's view for a moment.
	auditCache auditCache

	mu      sync.Mutex
	src     *Sources
	stop    context.CancelFunc // of the console's goroutines and streams
	done    chan struct{}      // closed when they have ended
	closing bool
}

// New returns a console for opts. It does no I/O: [Console.Handler] or
// [Console.Serve] shows the sources.
func New(opts *Options) (*Console, error) {
	if opts == nil || opts.Token == "" {
		return nil, errors.New("console: no operator token")
	}
	if len(opts.Token) < MinTokenLength {
		return nil, fmt.Errorf("console: %w: %d bytes, want at least %d (\"toolwire token new\" makes one)", ErrShortToken, len(opts.Token), MinTokenLength)
	}
	o := *opts
	if o.SessionIdle <= 0 {
		o.SessionIdle = time.Hour
	}
	if o.SessionMax <= 0 {
		o.SessionMax = 12 * time.Hour
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Console{opts: o, log: log, hub: newHub(), events: newObserved()}
	c.auth = newSessions(o.Token, o.SessionIdle, o.SessionMax)
	return c, nil
}

// Observe is told of the HTTP gateway's events ([gateway.HTTPOptions]
// Observe): the sessions page counts the sessions each caller has open,
// the limits page the refusals.
func (c *Console) Observe(ev gateway.Event) {
	if c.events.add(ev, time.Now()) {
		switch ev.Kind {
		case gateway.SessionOpened, gateway.SessionClosed:
			c.hub.notify(topicSessions)
		default:
			c.hub.notify(topicLimits)
		}
	}
}

// AuditSink wraps the audit log's sink (workspace.Telemetry.AuditSink) so
// that the audit page follows each event this process writes.
func (c *Console) AuditSink(s audit.Sink) audit.Sink {
	return &auditSink{next: s, notify: func() {
		c.auditCache.stale.Store(true)
		c.hub.notify(topicAudit)
	}}
}

type auditSink struct {
	next   audit.Sink
	notify func()
}

func (s *auditSink) Write(ev *audit.Event) error {
	err := s.next.Write(ev)
	s.notify()
	return err
}

// Handler returns the console's HTTP handler over src, and starts
// following src for changes until [Console.Close]. It may be called once.
func (c *Console) Handler(src *Sources) (http.Handler, error) {
	if src == nil || src.Workspace == nil {
		return nil, errors.New("console: no workspace to show")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src != nil {
		return nil, errors.New("console: Handler called twice")
	}
	if c.closing {
		return nil, errors.New("console: closed")
	}
	c.src = src
	ctx, stop := context.WithCancel(context.Background())
	c.stop, c.done = stop, make(chan struct{})
	go func() {
		defer close(c.done)
		c.follow(ctx)
	}()
	return c.routes(ctx), nil
}

// Serve serves the console on ln, with TLS when tlsConfig is set, until
// ctx ends; then it closes the console and the listener. The answer in
// progress gets a few seconds; event streams end at once.
func (c *Console) Serve(ctx context.Context, ln net.Listener, src *Sources, tlsConfig *tls.Config) error {
	h, err := c.Handler(src)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(c.log.Handler(), slog.LevelWarn),
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		c.Close()
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	c.Close() // ends the event streams, which Shutdown would wait for
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-served
	return nil
}

// Close stops following the sources and ends every event stream. It is
// safe to call more than once.
func (c *Console) Close() {
	c.mu.Lock()
	c.closing = true
	stop, done := c.stop, c.done
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// sources returns what Handler was given.
func (c *Console) sources() *Sources {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.src
}
