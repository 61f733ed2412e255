package gateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// The requestState of a multi round-trip request travels through the
// client, which must send it back unchanged with its answer. The spec
// requires a server to protect it when it decides anything (basic/patterns
// /mrtr, server requirements 4 and 5): the gateway's names the parked call
// it continues, so it is sealed with HMAC-SHA256 and bound to the round,
// the caller, the tool, the arguments and an expiry, each checked on every
// retry.

// stateVersion is the format of the gateway's requestState.
const stateVersion = 1

// stateContext separates this MAC from any other made with the same key.
const stateContext = "toolwire requestState v1\x00"

// minStateKey is the shortest [Options].StateKey accepted.
const minStateKey = 32

// sealedState is what a requestState says, in the clear (the client sees
// its own call's id, round and caller; the MAC keeps it from changing
// them).
type sealedState struct {
	V         int    `json:"v"`
	ID        string `json:"id"` // the parked call
	Round     int    `json:"r"`
	Principal string `json:"p"` // the caller (callerName); "" without authentication
	Tool      string `json:"t"` // as served
	Args      string `json:"a"` // argsDigest of the call's arguments
	Expires   int64  `json:"e"` // Unix milliseconds
}

// The ways a requestState is refused, each said to the client and audited.
var (
	errStateForged      = errors.New("requestState was not issued by this gateway (altered, forged, or issued under another key)")
	errStateExpired     = errors.New("requestState has expired: the call waited longer than it may for the answer and was cancelled")
	errStateOtherCaller = errors.New("requestState belongs to another caller's call")
	errStateOtherCall   = errors.New("requestState belongs to a call of another tool or with other arguments")
	errStateReplayed    = errors.New("requestState is for a question the call no longer waits on (answered already)")
	errStateUnknown     = errors.New("requestState names a call that is not waiting (it ended, or expired)")
	errStateLost        = errors.New("requestState names a call that was in flight on a gateway replica that is gone; its outcome is not known: call the tool again")
)

// sealer seals and opens requestStates with one key.
type sealer struct{ key []byte }

// newSealer returns a sealer with key, or with 32 random bytes when key is
// empty (a process's own; states then do not outlive it).
func newSealer(key []byte) *sealer {
	if len(key) == 0 {
		key = make([]byte, minStateKey)
		if _, err := rand.Read(key); err != nil {
			panic("gateway: no randomness for the requestState key: " + err.Error())
		}
	}
	return &sealer{key: bytes.Clone(key)}
}

func (s *sealer) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(stateContext))
	m.Write(payload)
	return m.Sum(nil)
}

// seal returns st as a requestState.
func (s *sealer) seal(st sealedState) string {
	st.V = stateVersion
	payload, _ := json.Marshal(st) // plain fields: cannot fail
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(s.mac(payload))
}

// open checks a requestState sent back by principal with a call of tool
// with args: its MAC first (nothing it says is read before), then that it
// is the same caller's, of the same call, and not expired at now.
func (s *sealer) open(state, principal, tool string, args []byte, now time.Time) (sealedState, error) {
	var st sealedState
	enc := base64.RawURLEncoding
	p64, m64, ok := strings.Cut(state, ".")
	if !ok {
		return st, errStateForged
	}
	payload, err1 := enc.DecodeString(p64)
	mac, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(payload)) {
		return st, errStateForged
	}
	if json.Unmarshal(payload, &st) != nil || st.V != stateVersion || st.ID == "" || st.Round < 1 {
		return st, errStateForged // sealed by us, so never: a format this build does not know
	}
	switch {
	case st.Principal != principal:
		return st, errStateOtherCaller
	case st.Tool != tool || st.Args != argsDigest(args):
		return st, errStateOtherCall
	case now.UnixMilli() > st.Expires:
		return st, errStateExpired
	}
	return st, nil
}

// argsDigest is the SHA-256 of a call's arguments in a canonical form
// (object keys sorted, numbers as written), so that a client that sends
// the same arguments again in another key order or spacing continues its
// call. No arguments, null and {} are the same; bytes that are not JSON
// are taken as they are.
func argsDigest(args []byte) string {
	canon := []byte("{}")
	if t := bytes.TrimSpace(args); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		canon = t
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil {
			if b, err := json.Marshal(v); err == nil {
				canon = b
			}
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
