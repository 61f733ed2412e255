// Package audit records what happened to every tool call, as its own stream
// apart from logging.
//
// An [Event] is one step of one call. A [Log] passes each event through its
// redactors, then hands it to a [Sink]; [FileSink] appends JSON Lines to a
// file. Redaction runs before anything is stored, and a redactor that fails
// replaces the event with an opaque one, so a secret never reaches the sink:
//
//	sink, err := audit.OpenFile("audit.jsonl")
//	...
//	log := audit.NewLog(sink, &audit.LogOptions{Redactor: audit.NewSecrets(token)})
//	log.Record(audit.Event{Kind: audit.CallRequested, Tool: "demo__echo"})
//	...
//	err = log.Close(ctx) // records an outcome for every call still open
//
// [Secrets] masks only whole occurrences of values of at least
// [MinSecretLen] characters, and changes nothing else. With
// [LogOptions].Required, an executor refuses the calls the log cannot
// record.
//
// The file is tamper-evident: each line carries the SHA-256 of the line
// before it, and with [FileSinkOptions].SigningKey an Ed25519 signature
// (chain.go describes the format). [Verify] reports the first place where
// a line was changed, removed, inserted or moved; its documentation says
// what a chain cannot show.
package audit

import (
	"encoding/json"
	"math"
	"time"
)

// Kind names one step of a call.
type Kind string

// The steps of a call, in the order they can happen.
const (
	CallRequested         Kind = "call.requested"
	ValidationPassed      Kind = "validation.passed"
	ValidationFailed      Kind = "validation.failed"
	ConfirmationRequested Kind = "confirmation.requested"
	ConfirmationAccepted  Kind = "confirmation.accepted"
	ConfirmationRejected  Kind = "confirmation.rejected"
	CallExecuted          Kind = "call.executed"
	CallErrored           Kind = "call.errored"
	// CallRetried records a call sent to its upstream once more because
	// the session was lost under the first attempt (only for a read-tier
	// tool the server declared idempotent); Attempt numbers it, Error
	// says what ended the previous one. The call's outcome follows.
	CallRetried Kind = "call.retried"
	// CallRefused is the outcome of a call refused before it reached the
	// executor (by the gateway: a tool the caller's role is not offered, a
	// limit); Reason and Error say why, Caller who asked.
	CallRefused Kind = "call.refused"
	// PolicyDecided records a policy rule's decision on a call (Reason
	// "allow", "deny" or "ask") or on its result ("withhold"): Rule names
	// the rule and Error carries the rule's reason.
	PolicyDecided Kind = "policy.decided"
	// A gateway's task whose call ran on a replica that was lost, and
	// whose upstream runs it as a task of its own, is followed to its end
	// by another replica: TaskAdopted when it takes the task over (Reason
	// says from which instance), TaskEnded when the task ends there
	// (Reason its status, Error its error). The call's own outcome is the
	// lost replica's (call.errored, instance_lost); these say what came
	// of it. Both carry the call's CallID ("task:" and the task's id).
	TaskAdopted Kind = "task.adopted"
	TaskEnded   Kind = "task.ended"
	// Server lifecycle events; Source names the server.
	ServerStarted     Kind = "server.started"     // Transport, Tools, Sandbox
	ServerFailed      Kind = "server.failed"      // Reason (the phase), Error
	ServerDegraded    Kind = "server.degraded"    // Attempt, Backoff, Error
	ServerReconnected Kind = "server.reconnected" // Attempt, Tools, Sandbox
	ServerStopped     Kind = "server.stopped"
	ToolsChanged      Kind = "tools.changed" // Added, Removed, Changed
	// ConfigReloaded records a configuration applied to a running process
	// (SIGHUP to toolwire serve): Added, Removed and Changed name the
	// servers; Reason is "refused" with Error when nothing was applied.
	ConfigReloaded Kind = "config.reloaded"
	// SessionRefused records a new gateway session refused by a limit:
	// Caller (when authenticated), Reason (the limit) and Error.
	SessionRefused Kind = "session.refused"
	// Tool pinning and size limits; Source names the server and Original
	// the server's own name for the tool.
	ToolPinned      Kind = "tool.pinned"      // Fingerprint; Reason "first-use" or "approved"
	ToolQuarantined Kind = "tool.quarantined" // Reason (added, changed, invalid), Pinned, Fingerprint, Fields, Error
	ToolUnapproved  Kind = "tool.unapproved"  // registered in warn mode though not approved; as tool.quarantined
	PinForgotten    Kind = "pin.forgotten"    // Original empty when every pin of the server was dropped
	PinsFailed      Kind = "pins.failed"      // Reason "withheld" (enforce) or "unchecked" (warn), Error
	ToolsExceeded   Kind = "tools.exceeded"   // Tools (how many were listed), Limit
	// LLMFailed records a failed request to a model by the agent loop:
	// Source names the provider, Reason the kind of failure, Attempt the
	// try it was, and Backoff the wait before the next try when there is one.
	LLMFailed Kind = "llm.failed"
	// RedactionFailed stands in for an event whose redaction failed; it
	// keeps only where the event belonged, never its content.
	RedactionFailed Kind = "redaction.failed"
)

// Event is one step of one tool call. Argument and result bytes are carried
// only when the executor is told to log them; their sizes always are.
type Event struct {
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`
	// Batch identifies the batch of calls the event belongs to; Index is the
	// call's position in it, and CallID the caller's own id for it, if any.
	Batch  string `json:"batch,omitempty"`
	Index  int    `json:"index"`
	CallID string `json:"call_id,omitempty"`
	// Caller identifies who made the call, when the caller is known (for
	// a call through the gateway: the authenticated subject).
	Caller string `json:"caller,omitempty"`
	// Instance names the process that recorded the event: in a fleet on
	// PostgreSQL the replica's instance id in the store (as in the
	// Toolwire-Instance header of its HTTP answers), on one machine an id
	// drawn when the process started. Set by the [Log] from
	// [LogOptions].Instance; empty when none was given.
	Instance string `json:"instance,omitempty"`
	// Protocol and Client say how a call through the gateway arrived: the
	// MCP revision its request spoke and the client's name and version as
	// the client announced them (its words, bounded).
	Protocol string `json:"protocol,omitempty"`
	Client   string `json:"client,omitempty"`
	// Tool is the registered name; Source and Original say where it came
	// from (for an MCP tool, the server and the server's own tool name).
	Tool     string `json:"tool,omitempty"`
	Source   string `json:"source,omitempty"`
	Original string `json:"original,omitempty"`
	Tier     string `json:"tier,omitempty"`
	// Duration is how long the step took (validation, confirmation or
	// execution), when the step takes time.
	Duration    time.Duration `json:"-"`
	ArgsBytes   int           `json:"args_bytes,omitempty"`
	ResultBytes int           `json:"result_bytes,omitempty"`
	// Reason classifies a failure; Error describes it.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// UpstreamIdentity says, on a call's outcome, with whose identity the
	// call reached its upstream: "shared" (the one credential configured
	// for every caller), or the caller's own as the source describes it
	// (for an MCP server with per-caller OAuth credentials, the caller and
	// how their upstream token was obtained). Never a token.
	UpstreamIdentity string `json:"upstream_identity,omitempty"`
	// Rule names the policy rule that decided (policy.decided).
	Rule string `json:"rule,omitempty"`
	// Args and Result are present only when argument logging is on.
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`

	// Server lifecycle fields.
	Transport string        `json:"transport,omitempty"`
	Tools     int           `json:"tools,omitempty"`
	Attempt   int           `json:"attempt,omitempty"`
	Backoff   time.Duration `json:"-"`
	Added     []string      `json:"added,omitempty"`
	Removed   []string      `json:"removed,omitempty"`
	Changed   []string      `json:"changed,omitempty"`
	// Sandbox says how a stdio server's process is confined, on
	// server.started and server.reconnected.
	Sandbox string `json:"sandbox,omitempty"`

	// Tool pinning fields: the fingerprint of the tool's current
	// definition, the pinned one it was compared with, and the parts of the
	// definition that differ ("description", "inputSchema", ...).
	Fingerprint string   `json:"fingerprint,omitempty"`
	Pinned      string   `json:"pinned,omitempty"`
	Fields      []string `json:"fields,omitempty"`
	// Limit is the limit a tools.exceeded event reports.
	Limit int `json:"limit,omitempty"`
}

// plainEvent has Event's fields without its methods, so encoding it does not
// recurse into MarshalJSON.
type plainEvent Event

// wireEvent is an event as written: the duration in fractional
// milliseconds, which reads better in a log than nanoseconds.
type wireEvent struct {
	plainEvent
	DurationMS *float64 `json:"duration_ms,omitempty"`
	BackoffMS  *float64 `json:"backoff_ms,omitempty"`
}

func (e *Event) wire() wireEvent {
	return wireEvent{plainEvent: plainEvent(*e), DurationMS: millis(e.Duration), BackoffMS: millis(e.Backoff)}
}

func millis(d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	ms := durationMillis(d)
	return &ms
}

// durationMillis is d in milliseconds with microsecond precision, as
// written.
func durationMillis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fromMillis(ms *float64) time.Duration {
	if ms == nil {
		return 0
	}
	return time.Duration(math.Round(*ms * float64(time.Millisecond)))
}

// MarshalJSON writes the event with its duration in milliseconds.
func (e Event) MarshalJSON() ([]byte, error) { return AppendJSON(nil, &e) }

// UnmarshalJSON reads an event written by MarshalJSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	var v wireEvent
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = Event(v.plainEvent)
	e.Duration = fromMillis(v.DurationMS)
	e.Backoff = fromMillis(v.BackoffMS)
	return nil
}
