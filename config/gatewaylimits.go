package config

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// GatewayLimits are the "gateway.limits" settings of "toolwire serve
// --http". A nil field is not set (the gateway's default applies); a zero
// count or rate means no limit. docs/operations.md describes each.
type GatewayLimits struct {
	SessionIdleTimeout   *time.Duration
	MaxSessions          *int
	MaxSessionsPerCaller *int
	MaxCallsPerSession   *int
	MaxCallsPerCaller    *int
	CallRate             *float64 // calls per second per caller
	CallBurst            *int
	MaxListensPerCaller  *int // open subscriptions/listen streams (2026-07-28)
	MaxListenResources   *int // resources one subscriptions/listen may name
	ReadHeaderTimeout    *time.Duration
	ReadBodyTimeout      *time.Duration
	IdleTimeout          *time.Duration // of a keep-alive connection
	MaxHeaderBytes       *int
	MaxBodyBytes         *int
	DrainGrace           *time.Duration
	DrainDelay           *time.Duration // readiness 503 while still serving, before the drain
}

// GatewayTLS is "gateway.tls": the PEM certificate (chain) and key files
// the gateway serves HTTPS with. Both are re-read when they change.
type GatewayTLS struct {
	CertFile string
	KeyFile  string
}

var (
	limitsFields = []string{
		"sessionIdleTimeout", "maxSessions", "maxSessionsPerCaller", "maxCallsPerSession", "maxCallsPerCaller",
		"callRate", "callBurst", "maxListensPerCaller", "maxListenResources", "readHeaderTimeout", "readBodyTimeout", "idleTimeout", "maxHeaderBytes", "maxBodyBytes", "drainGrace", "drainDelay",
	}
	tlsFields = []string{"certFile", "keyFile"}
)

func (d *decoder) gatewayLimits(v *node, lpath string) *GatewayLimits {
	if !d.wantMap(v, lpath, "a map of limits") {
		return nil
	}
	l := &GatewayLimits{}
	dur := func(n *node, p string) *time.Duration {
		s, ok := d.str(n, p, `a duration such as "30s"`)
		if !ok {
			return nil
		}
		v, err := time.ParseDuration(s)
		switch {
		case err != nil:
			d.errorf(n.line, p, `invalid duration %q (want a Go duration such as "30s" or "2m")`, s)
		case v <= 0:
			d.errorf(n.line, p, "must be greater than zero, got %q", s)
		default:
			return &v
		}
		return nil
	}
	count := func(n *node, p string) *int {
		if n.kind != scalarNode || n.typ != typeInt {
			d.mismatch(n, p, "a whole number (0 for no limit)")
			return nil
		}
		v, err := strconv.Atoi(n.text)
		if err != nil || v < 0 {
			d.errorf(n.line, p, "must be a whole number, 0 or more (0 for no limit), got %s", n.text)
			return nil
		}
		return &v
	}
	for _, f := range d.entries(v, lpath) {
		fpath := joinPath(lpath, f.key)
		switch f.key {
		case "sessionIdleTimeout":
			l.SessionIdleTimeout = dur(f.value, fpath)
		case "readHeaderTimeout":
			l.ReadHeaderTimeout = dur(f.value, fpath)
		case "readBodyTimeout":
			l.ReadBodyTimeout = dur(f.value, fpath)
		case "idleTimeout":
			l.IdleTimeout = dur(f.value, fpath)
		case "drainGrace":
			l.DrainGrace = dur(f.value, fpath)
		case "drainDelay":
			l.DrainDelay = dur(f.value, fpath)
		case "maxSessions":
			l.MaxSessions = count(f.value, fpath)
		case "maxSessionsPerCaller":
			l.MaxSessionsPerCaller = count(f.value, fpath)
		case "maxCallsPerSession":
			l.MaxCallsPerSession = count(f.value, fpath)
		case "maxCallsPerCaller":
			l.MaxCallsPerCaller = count(f.value, fpath)
		case "callBurst":
			l.CallBurst = count(f.value, fpath)
		case "maxListensPerCaller":
			l.MaxListensPerCaller = count(f.value, fpath)
		case "maxListenResources":
			l.MaxListenResources = count(f.value, fpath)
		case "maxHeaderBytes":
			l.MaxHeaderBytes = count(f.value, fpath)
		case "maxBodyBytes":
			l.MaxBodyBytes = count(f.value, fpath)
		case "callRate":
			n := f.value
			if n.kind != scalarNode || (n.typ != typeInt && n.typ != typeFloat) {
				d.mismatch(n, fpath, "a number of calls per second (0 for no limit)")
				break
			}
			r, err := strconv.ParseFloat(n.text, 64)
			if err != nil || r < 0 {
				d.errorf(n.line, fpath, "must be a number of calls per second, 0 or more (0 for no limit), got %s", n.text)
				break
			}
			l.CallRate = &r
		default:
			d.unknownField(f, lpath, limitsFields)
		}
	}
	return l
}

func (d *decoder) gatewayTLS(v *node, tpath string) *GatewayTLS {
	if !d.wantMap(v, tpath, "a map with certFile and keyFile") {
		return nil
	}
	t := &GatewayTLS{}
	for _, f := range d.entries(v, tpath) {
		fpath := joinPath(tpath, f.key)
		switch f.key {
		case "certFile", "keyFile":
			// Relative to the configuration file, like every file it names.
			p, ok := d.nonEmpty(f.value, fpath)
			if ok {
				p = d.resolvePath(f.value.line, fpath, p, false)
			}
			if f.key == "certFile" {
				t.CertFile = p
			} else {
				t.KeyFile = p
			}
		default:
			d.unknownField(f, tpath, tlsFields)
		}
	}
	d.requireKeys(v, tpath, tlsFields)
	return t
}

func limitsNode(l *GatewayLimits) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	dur := func(k string, v *time.Duration) {
		if v != nil {
			addPair(m, k, str(v.String()))
		}
	}
	count := func(k string, v *int) {
		if v != nil {
			addPair(m, k, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(*v)})
		}
	}
	dur("sessionIdleTimeout", l.SessionIdleTimeout)
	count("maxSessions", l.MaxSessions)
	count("maxSessionsPerCaller", l.MaxSessionsPerCaller)
	count("maxCallsPerSession", l.MaxCallsPerSession)
	count("maxCallsPerCaller", l.MaxCallsPerCaller)
	if l.CallRate != nil {
		addPair(m, "callRate", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(*l.CallRate, 'g', -1, 64)})
	}
	count("callBurst", l.CallBurst)
	count("maxListensPerCaller", l.MaxListensPerCaller)
	count("maxListenResources", l.MaxListenResources)
	dur("readHeaderTimeout", l.ReadHeaderTimeout)
	dur("readBodyTimeout", l.ReadBodyTimeout)
	dur("idleTimeout", l.IdleTimeout)
	count("maxHeaderBytes", l.MaxHeaderBytes)
	count("maxBodyBytes", l.MaxBodyBytes)
	dur("drainGrace", l.DrainGrace)
	dur("drainDelay", l.DrainDelay)
	if len(m.Content) == 0 {
		m.Style = yaml.FlowStyle
	}
	return m
}

func tlsNode(t *GatewayTLS) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	addPair(m, "certFile", str(t.CertFile))
	addPair(m, "keyFile", str(t.KeyFile))
	return m
}

// originProblem says what is wrong with an allowed origin, or "".
func originProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("origin %q: want http(s)://host[:port], such as https://app.example.com", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Sprintf("origin %q: an origin is only scheme://host[:port], without path, query or user", s)
	}
	return ""
}
