package config

import (
	"strconv"
)

var securityFields = []string{"strict", "pins", "pinsFile", "allowHosts", "maxDescription", "maxResultBytes", "maxTools", "sandbox"}

// Security holds the "security" section: how far untrusted servers are
// trusted. Zero values mean the defaults; "toolwire --strict" turns on
// Strict whatever the file says.
type Security struct {
	// Strict turns on everything below that is off by default: the egress
	// guard, and pins in enforce mode unless Pins says otherwise.
	Strict bool
	// Pins is the tool-pinning mode: "off", "warn" or "enforce"; "" means
	// warn, or enforce under Strict.
	Pins string
	// PinsFile is where the pins are kept; "" means the user's config
	// directory (toolwire/pins.json). Absolute when loaded with Load.
	PinsFile string
	// AllowHosts are hosts every remote server may reach besides its own
	// URL's host, when the egress guard is on: exact names, IP addresses,
	// or "*.example.com" for the names below a domain.
	AllowHosts []string
	// MaxDescription caps a tool description, in characters; longer ones
	// are cut. 0 means the default.
	MaxDescription int
	// MaxResultBytes caps the text of a result passed to a model or a
	// client; larger ones are truncated with a marker. 0 means the default.
	MaxResultBytes int
	// Sandbox says how stdio servers are confined: SandboxOn (""),
	// SandboxRequired or SandboxOff.
	Sandbox string
	// MaxTools is how many tools one server may list before it is reported.
	// 0 means the default.
	MaxTools int
}

// Defaults for the size limits of [Security].
const (
	DefaultMaxDescription = 4096
	DefaultMaxResultBytes = 256 << 10
	DefaultMaxTools       = 256
)

// PinMode returns the effective pin mode.
func (s Security) PinMode() string {
	switch {
	case s.Pins != "":
		return s.Pins
	case s.Strict:
		return "enforce"
	}
	return "warn"
}

// DescriptionLimit returns the effective MaxDescription.
func (s Security) DescriptionLimit() int { return orDefault(s.MaxDescription, DefaultMaxDescription) }

// ResultLimit returns the effective MaxResultBytes.
func (s Security) ResultLimit() int { return orDefault(s.MaxResultBytes, DefaultMaxResultBytes) }

// ToolLimit returns the effective MaxTools.
func (s Security) ToolLimit() int { return orDefault(s.MaxTools, DefaultMaxTools) }

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (d *decoder) security(v *node, s *Security) {
	const path = "security"
	if !d.wantMap(v, path, "a map of security settings") {
		return
	}
	for _, p := range d.entries(v, path) {
		fpath := joinPath(path, p.key)
		switch p.key {
		case "strict":
			if b, ok := d.boolean(p.value, fpath); ok {
				s.Strict = b
			}
		case "pins":
			if m, ok := d.str(p.value, fpath, `"off", "warn" or "enforce"`); ok {
				switch m {
				case "off", "warn", "enforce":
					s.Pins = m
				default:
					d.errorf(p.value.line, fpath, `unknown pin mode %q (want off, warn or enforce)`, m)
				}
			}
		case "pinsFile":
			if f, ok := d.nonEmpty(p.value, fpath); ok {
				s.PinsFile = d.resolvePath(p.value.line, fpath, f, false)
			}
		case "allowHosts":
			if list, ok := d.strList(p.value, fpath, true); ok {
				s.AllowHosts = list
			}
		case "sandbox":
			if m, ok := d.choice(p.value, fpath, "sandbox mode", "on, required or off", "on", SandboxRequired, SandboxOff); ok {
				if m == "on" {
					m = SandboxOn
				}
				s.Sandbox = m
			}
		case "maxDescription":
			s.MaxDescription = d.positive(p.value, fpath)
		case "maxResultBytes":
			s.MaxResultBytes = d.positive(p.value, fpath)
		case "maxTools":
			s.MaxTools = d.positive(p.value, fpath)
		default:
			d.unknownField(p, path, securityFields)
		}
	}
}

// positive reads a whole number greater than zero, or reports why not.
func (d *decoder) positive(n *node, path string) int {
	if n.kind != scalarNode || n.typ != typeInt {
		d.mismatch(n, path, "a whole number")
		return 0
	}
	v, err := strconv.Atoi(n.text)
	if err != nil || v <= 0 {
		d.errorf(n.line, path, "must be a whole number greater than zero, got %s", n.text)
		return 0
	}
	return v
}
