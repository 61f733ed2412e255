package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// downstream is the client that made a call through the gateway, as the
// call reaches it while it runs: to ask it something (an approval, an
// upstream's elicitation or sampling request) and to tell it of progress
// and log lines. Over a 2025 session that is requests and notifications on
// the session ([sessionDownstream]); on 2026-07-28, questions are input
// requests of the parked call and notes go to the request waiting on it
// ([parkedCall]).
type downstream interface {
	// capabilities are what the client declared: at initialize (2025), in
	// the _meta of the request that started the call (2026-07-28).
	capabilities() *mcp.ClientCapabilities
	// ask puts a question of kind, whose params are the protocol's JSON,
	// and returns the answer's JSON. The caller has checked that the
	// client declared it can answer.
	ask(ctx context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error)
	progress(ctx context.Context, p tool.Progress)
	log(ctx context.Context, m tool.LogMessage)
}

type downstreamKey struct{}

func withDownstream(ctx context.Context, d downstream) context.Context {
	return context.WithValue(ctx, downstreamKey{}, d)
}

// downstreamFrom returns the client of the call ctx belongs to, or nil
// when the call did not come through the gateway.
func downstreamFrom(ctx context.Context) downstream {
	d, _ := ctx.Value(downstreamKey{}).(downstream)
	return d
}

// relay is the [tool.Caller] of a call through the gateway: what the
// tool's upstream sends during the call goes to the client that made it.
// Progress goes under the client's own token (none when it asked for
// none), log lines are filtered by the client's level, and an elicitation
// or sampling request reaches the client only when it declared it can
// answer that kind (and, for elicitation, that mode); otherwise the
// upstream is told the client cannot.
type relay struct{ d downstream }

func (r relay) Progress(ctx context.Context, p tool.Progress) { r.d.progress(ctx, p) }

func (r relay) Log(ctx context.Context, m tool.LogMessage) { r.d.log(ctx, m) }

func (r relay) Ask(ctx context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	if err := answerable(r.d.capabilities(), kind, params); err != nil {
		return nil, err
	}
	return r.d.ask(ctx, kind, params)
}

// answerable says why a client with caps cannot be asked a question of kind
// with params, wrapping [tool.ErrNotSupported], or nil when it can. The
// spec forbids asking what the client did not declare; go-sdk checks
// elicitation modes on a session's requests but nothing on 2026-07-28
// input requests, so the gateway checks both alike.
func answerable(caps *mcp.ClientCapabilities, kind tool.RequestKind, params json.RawMessage) error {
	switch kind {
	case tool.Elicitation:
		if caps == nil || caps.Elicitation == nil {
			return fmt.Errorf("the client does not support elicitation: %w", tool.ErrNotSupported)
		}
		var p struct {
			Mode string `json:"mode"`
			URL  string `json:"url"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return fmt.Errorf("elicitation/create: %w", err)
		}
		if p.Mode == "url" || (p.Mode == "" && p.URL != "") {
			if caps.Elicitation.URL == nil {
				return fmt.Errorf("the client does not support URL-mode elicitation: %w", tool.ErrNotSupported)
			}
			return nil
		}
		if !formElicitation(caps) {
			return fmt.Errorf("the client does not support form elicitation: %w", tool.ErrNotSupported)
		}
		return nil
	case tool.Sampling:
		if caps == nil || caps.Sampling == nil {
			return fmt.Errorf("the client does not support sampling: %w", tool.ErrNotSupported)
		}
		return nil
	}
	return fmt.Errorf("%s: %w", kind, tool.ErrNotSupported)
}

// formElicitation reports whether caps declare form-mode elicitation: a
// form capability, or an elicitation capability naming no mode (what
// clients before 2025-11-25 send).
func formElicitation(caps *mcp.ClientCapabilities) bool {
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	return e.Form != nil || e.URL == nil
}

// sessionDownstream is the client of a 2025 session: asked by requests on
// the session while the call runs, told by notifications on it.
type sessionDownstream struct {
	ss    *mcp.ServerSession
	token any // nil when the client asked for no progress
}

func (s *sessionDownstream) capabilities() *mcp.ClientCapabilities {
	ip := s.ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return nil
	}
	return forRevision(ip.ProtocolVersion, ip.Capabilities)
}

// forRevision is caps without what revision rev does not have, whatever
// the client declared: elicitation came in 2025-06-18, its URL mode in
// 2025-11-25.
func forRevision(rev string, caps *mcp.ClientCapabilities) *mcp.ClientCapabilities {
	if caps.Elicitation == nil || rev >= "2025-11-25" {
		return caps
	}
	c := *caps
	switch {
	case rev < "2025-06-18":
		c.Elicitation = nil
	case caps.Elicitation.URL != nil:
		e := *caps.Elicitation
		e.URL = nil
		c.Elicitation = &e
	}
	return &c
}

func (s *sessionDownstream) ask(ctx context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	switch kind {
	case tool.Elicitation:
		var p mcp.ElicitParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("elicitation/create: %w", err)
		}
		res, err := s.ss.Elicit(ctx, &p)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	case tool.Sampling:
		var p mcp.CreateMessageParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("sampling/createMessage: %w", err)
		}
		res, err := s.ss.CreateMessage(ctx, &p)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}
	return nil, fmt.Errorf("%s: %w", kind, tool.ErrNotSupported)
}

func (s *sessionDownstream) progress(ctx context.Context, pr tool.Progress) {
	if s.token == nil {
		return
	}
	_ = s.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: s.token, Progress: pr.Progress, Total: pr.Total, Message: pr.Message,
	})
}

func (s *sessionDownstream) log(ctx context.Context, m tool.LogMessage) {
	sendLog(ctx, s.ss, m)
}

// sendLog sends a log line to ss, which filters it by the client's level:
// the one it set (2025) or the one in the request's _meta, which ctx
// carries (2026-07-28).
func sendLog(ctx context.Context, ss *mcp.ServerSession, m tool.LogMessage) {
	var data any
	if err := json.Unmarshal(m.Data, &data); err != nil {
		return
	}
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(m.Level), Logger: m.Logger, Data: data})
}
