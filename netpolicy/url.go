package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// plainHTTPReason is the refusal every non-loopback http URL gets.
const plainHTTPReason = "plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost); use https"

// URLError reports a URL that the remote-URL rule refuses.
type URLError struct {
	// URL is the refused URL with any user name and password removed.
	URL string
	// Reason says what is wrong and what was expected. Apart from the
	// scheme it repeats no part of the URL, so it may be shown where the
	// URL itself must not be (a URL built from secrets, say).
	Reason string
}

// Error names the URL and the reason.
func (e *URLError) Error() string {
	return fmt.Sprintf("url %q: %s", e.URL, e.Reason)
}

// CheckURL applies the remote-URL rule to a configured endpoint and returns
// the parsed URL. The rule: https to any host; plain http only to a loopback
// address, meaning an IPv4 address in 127.0.0.0/8 written as four decimal
// numbers, the IPv6 address ::1, or the name localhost (any case, with or
// without one trailing dot). Any other scheme, a user name or password, a
// fragment, a missing host and a port outside 1 to 65535 are refused.
//
// Hosts that spell an IPv4 address any other way (2130706433, 0177.0.0.1,
// 0x7f.1, 127.1, 127.0.0.1.) are refused under either scheme: some resolvers
// read them as addresses and others as names, so the rule could not know
// where they lead. The IPv4-mapped form ::ffff:127.0.0.1 is not loopback for
// this rule: the rule accepts only the usual spellings, and relaxing it is a
// one-line change. Internationalized host names are fine over https.
//
// The error is a *URLError.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		reason := "not a valid URL"
		// Go's message may quote part of a mistyped password.
		var ue *url.Error
		if errors.As(err, &ue) && !strings.Contains(raw, "@") {
			reason += ": " + ue.Err.Error()
		}
		return nil, &URLError{URL: redact(raw, true), Reason: reason}
	}
	reason := problem(u)
	if reason == "" && strings.Contains(raw, "#") {
		reason = `must not have a fragment ("#...")`
	}
	if reason != "" {
		broad := u.User == nil && strings.Contains(u.Opaque, "@")
		return nil, &URLError{URL: redact(raw, broad), Reason: reason}
	}
	return u, nil
}

// problem applies the rule to a parsed URL and returns what is wrong with
// it, or "" when nothing is. It is the whole rule for a redirect target; a
// configured URL is also checked for an empty fragment, which parsing hides.
func problem(u *url.URL) string {
	switch {
	case u.Scheme == "":
		return "missing scheme; want https://, or http:// to a loopback address"
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Sprintf("scheme %q is not allowed; want https, or http to a loopback address", u.Scheme)
	case u.User != nil:
		return "must not contain a user name or password; send credentials in a header"
	case u.Hostname() == "":
		return "has no host"
	case u.Fragment != "":
		return `must not have a fragment ("#...")`
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "port must be a number from 1 to 65535"
		}
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err != nil && endsInNumber(host) {
		return "host is an IPv4 address in a non-standard form (decimal, octal, hex, shortened or with a trailing dot); write it as four decimal numbers"
	}
	if u.Scheme == "http" && !IsLoopbackHost(host) {
		return plainHTTPReason
	}
	return ""
}

// IsLoopbackHost reports whether host, as URL.Hostname returns it (no
// brackets, no port), is one the rule lets plain http reach: "localhost"
// (any case, one trailing dot) or a loopback address written plainly
// (127.0.0.0/8, ::1; not IPv4-mapped, no zone). The gateway's and the OAuth
// loopback checks use it too, so that all agree.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Zone() == "" && !a.Is4In6() && a.IsLoopback()
}

// endsInNumber reports whether a browser would parse host as an IPv4
// address: its last label, ignoring one trailing dot, is all decimal digits
// or 0x followed by hex digits (the WHATWG URL standard's "ends in a number"
// test). Such a host is either a valid dotted-quad or a non-standard form.
func endsInNumber(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	digits, hex := last, false
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		digits, hex = last[2:], true
	}
	for _, c := range []byte(digits) {
		isDigit := '0' <= c && c <= '9'
		isHex := 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
		if !isDigit && !(hex && isHex) {
			return false
		}
	}
	return true
}

// redact removes the user name and password from a URL string so that it
// can be named in an error. The authority ends where Go's parser ends it,
// at the first '/', '?' or '#'. With broad set (for a URL that did not parse
// or has an '@' where no authority is) everything up to the last '@' goes,
// since there is no telling where a mistyped password ends.
func redact(raw string, broad bool) string {
	start := schemeEnd(raw)
	if strings.HasPrefix(raw[start:], "//") {
		start += 2
	}
	rest := raw[start:]
	if !broad {
		if end := strings.IndexAny(rest, "/?#"); end >= 0 {
			rest = rest[:end]
		}
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return raw
	}
	return raw[:start] + raw[start+at+1:]
}

// schemeEnd returns the index just past "scheme:" at the start of raw, or 0
// when raw does not start with a scheme (RFC 3986, section 3.1).
func schemeEnd(raw string) int {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

// display is the form of a parsed URL that errors show: without userinfo.
func display(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}
