package console

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"strings"

	"github.com/toolwire/toolwire/netpolicy"
)

// ErrPlainExposure is returned by [CheckExposure] for a non-loopback
// address without TLS: the operator token, and the session cookie after
// it, would cross the network in the clear.
var ErrPlainExposure = errors.New("the console on a non-loopback address without TLS would send the operator token in the clear")

// CheckExposure decides whether the console may listen on addr
// (host:port), fail-closed: on loopback always; elsewhere only with TLS,
// or when allowPlain says a TLS proxy in front terminates it.
func CheckExposure(addr string, tls, allowPlain bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if netpolicy.IsLoopbackHost(host) || tls || allowPlain {
		return nil
	}
	return ErrPlainExposure
}

// SameAsCallerToken reports whether token is one of the callers' tokens,
// given as the SHA-256 hex hashes the gateway's configuration keeps: the
// operator's credential must be another, or a caller could sign in to the
// console and approve its own calls.
func SameAsCallerToken(token string, hashes []string) bool {
	sum := sha256.Sum256([]byte(token))
	own := hex.EncodeToString(sum[:])
	for _, h := range hashes {
		if strings.EqualFold(h, own) {
			return true
		}
	}
	return false
}
