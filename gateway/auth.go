package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// StaticToken is one bearer token a caller may present, stored as the
// SHA-256 of the token (hex), never the token itself, with the subject it
// identifies and the role it grants.
type StaticToken struct {
	SHA256  string
	Subject string
	Role    string
}

// HashToken returns the hex SHA-256 of token, the form [StaticToken] keeps.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// errInvalidToken is the verifier's answer to any token it does not know;
// the middleware turns it into a 401 without saying more.
var errInvalidToken = fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)

// StaticVerifier returns a token verifier for a fixed set of tokens. Every
// known hash is compared in constant time, so the time taken does not tell
// how close a guess was.
func StaticVerifier(tokens []StaticToken) (auth.TokenVerifier, error) {
	type entry struct {
		sum           [sha256.Size]byte
		subject, role string
	}
	entries := make([]entry, 0, len(tokens))
	for i, t := range tokens {
		raw, err := hex.DecodeString(t.SHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("token %d (%s): sha256 must be 64 hex digits", i+1, t.Subject)
		}
		if t.Subject == "" || t.Role == "" {
			return nil, fmt.Errorf("token %d: needs a subject and a role", i+1)
		}
		var e entry
		copy(e.sum[:], raw)
		e.subject, e.role = t.Subject, t.Role
		entries = append(entries, e)
	}
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		sum := sha256.Sum256([]byte(token))
		var match *entry
		for i := range entries {
			if subtle.ConstantTimeCompare(sum[:], entries[i].sum[:]) == 1 {
				match = &entries[i]
			}
		}
		if match == nil {
			return nil, errInvalidToken
		}
		return &auth.TokenInfo{
			UserID:     match.subject,
			Expiration: time.Now().Add(time.Hour), // static tokens do not expire; the middleware wants a time
			// The session binding names a static token by this hash; it
			// is computed here already.
			Extra: map[string]any{roleKey: match.role, credentialKey: hex.EncodeToString(sum[:])},
		}, nil
	}, nil
}

// roleKey is where a verifier puts the caller's role in TokenInfo.Extra.
const roleKey = "toolwire.role"

// Roles maps a role to the tools it may see and call, as glob patterns over
// registered names (path.Match syntax: "files__*", "*__read_*").
type Roles map[string][]string

// Validate checks every pattern.
func (r Roles) Validate() error {
	var errs []error
	for role, globs := range r {
		for _, g := range globs {
			if _, err := path.Match(g, ""); err != nil {
				errs = append(errs, fmt.Errorf("role %q: pattern %q: %w", role, g, err))
			}
		}
	}
	return errors.Join(errs...)
}

// allows reports whether role may use the tool named name. An unknown role
// may use nothing.
func (r Roles) allows(role, name string) bool {
	for _, g := range r[role] {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// differ reports whether two roles see different tools: then what a
// caller is served depends on who it is.
func (r Roles) differ() bool {
	var first string
	seen := false
	for _, globs := range r {
		key := strings.Join(slices.Sorted(slices.Values(globs)), "\x00")
		if seen && key != first {
			return true
		}
		first, seen = key, true
	}
	return false
}

// callerOf returns the authenticated subject and role of a request, or
// empty strings when it carries no verified token.
func callerOf(req *http.Request) (subject, role string) {
	ti := auth.TokenInfoFromContext(req.Context())
	if ti == nil {
		return "", ""
	}
	role, _ = ti.Extra[roleKey].(string)
	return ti.UserID, strings.TrimSpace(role)
}
