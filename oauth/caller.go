package oauth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Caller identifies a caller of a gateway: the principal the gateway
// verified the caller's token for. With per-caller upstream credentials
// ([Callers]) every upstream token is obtained for one Caller and used for
// that Caller only.
type Caller struct {
	// Issuer is who vouches for Subject: the "iss" of the caller's JWT,
	// or "" for a caller the gateway knows by a token of its own
	// configuration (a static token).
	Issuer string `json:"issuer,omitempty"`
	// Subject is the caller's subject ("sub"). Required.
	Subject string `json:"subject"`
}

// String names the caller, for messages and the audit log: the subject,
// and its issuer in parentheses when there is one.
func (c Caller) String() string {
	if c.Issuer == "" {
		return fmt.Sprintf("%q", c.Subject)
	}
	return fmt.Sprintf("%q (%s)", c.Subject, c.Issuer)
}

// id is the caller's pseudonym in store keys and in the state of its
// authorization requests: 128 bits of the SHA-256 of issuer and subject.
// The entry itself keeps the whole Caller under the seal, and is used only
// for exactly that Caller; the pseudonym only finds it, and keeps who has
// logged in out of a database's plain columns.
func (c Caller) id() string {
	sum := sha256.Sum256([]byte(c.Issuer + "\x00" + c.Subject))
	return hex.EncodeToString(sum[:16])
}

// Token types of RFC 8693, section 3, that a caller's token is presented
// as in a token exchange.
const (
	// TokenTypeAccessToken is an OAuth access token, opaque or not.
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	// TokenTypeJWT is a JWT, whatever it was issued as.
	TokenTypeJWT = "urn:ietf:params:oauth:token-type:jwt"
)

// SubjectToken is a caller's own token as the gateway verified it: what a
// token exchange presents as the subject_token. It is sent to the
// upstream's authorization server only (the issuer configured for the
// exchange), never to an upstream MCP server. Its String method leaves
// the token out.
type SubjectToken struct {
	// Token is the token, as the caller presented it.
	Token string
	// Expiry is when the gateway stops accepting it (its "exp"); zero
	// when unknown. An exchanged token is not used past it.
	Expiry time.Time
}

func (t SubjectToken) String() string {
	if t.Expiry.IsZero() {
		return "SubjectToken{[redacted]}"
	}
	return "SubjectToken{[redacted] expires " + t.Expiry.UTC().Format(time.RFC3339) + "}"
}

// Store keys of per-caller state. A configured server name is
// [A-Za-z0-9_.-]{1,64}, so no key with a ':' is ever a server's.
const (
	callerKeyPrefix = "caller:"  // caller:SERVER:ID, one caller's entry
	sharedKeyPrefix = "callers:" // callers:SERVER, the registration all callers share
)

// callerKey is the store key of caller's entry for server.
func callerKey(server string, c Caller) string {
	return callerKeyPrefix + server + ":" + c.id()
}

// sharedKey is the store key of the client registration the callers of
// server share.
func sharedKey(server string) string { return sharedKeyPrefix + server }

// isServerKey reports whether a store key is a configured server's rather
// than per-caller state.
func isServerKey(key string) bool { return !strings.Contains(key, ":") }

// stateSep separates the parts of a per-caller authorization request's
// state: SERVER~ID~RANDOM. Neither a server name, nor a caller's id, nor
// rand.Text has a '~', which is unreserved in URLs (RFC 3986, section
// 2.3), so the state needs no escaping.
const stateSep = "~"

// callerState returns a fresh state for caller's authorization at server:
// the callback finds the caller's entry from it, and then compares the
// whole state with the one stored there.
func callerState(server string, c Caller) string {
	return server + stateSep + c.id() + stateSep + randomState()
}

// parseCallerState returns the server and caller id a state names.
func parseCallerState(state string) (server, id string, ok bool) {
	parts := strings.Split(state, stateSep)
	if len(parts) != 3 || parts[0] == "" || len(parts[1]) != 32 || parts[2] == "" {
		return "", "", false
	}
	if _, err := hex.DecodeString(parts[1]); err != nil {
		return "", "", false
	}
	return parts[0], parts[1], true
}
