package pins

import "fmt"

// Mode says what [Store.Check] does with a tool whose definition is not
// the pinned one. The zero value is not a valid mode, and Check refuses it:
// a mode that was never set is not taken to mean "off".
type Mode uint8

const (
	// Off skips pinning: every tool is allowed, nothing is read or written.
	Off Mode = iota + 1
	// Warn pins on first use and allows everything else, reporting each
	// new or changed tool so that the caller can warn and audit.
	Warn
	// Enforce pins on first use and quarantines every new or changed tool
	// until an operator approves it.
	Enforce
)

var modeNames = [...]string{Off: "off", Warn: "warn", Enforce: "enforce"}

// ParseMode returns the mode named s: "off", "warn" or "enforce". Any other
// string is an error; there is no default.
func ParseMode(s string) (Mode, error) {
	for m := Off; m <= Enforce; m++ {
		if modeNames[m] == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown pin mode %q (want off, warn or enforce)", s)
}

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return m >= Off && m <= Enforce }

// String returns the mode's name, or "invalid(N)" for an invalid mode.
func (m Mode) String() string {
	if !m.Valid() {
		return fmt.Sprintf("invalid(%d)", uint8(m))
	}
	return modeNames[m]
}

// MarshalText encodes the mode as its name.
func (m Mode) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("invalid pin mode %d", uint8(m))
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText decodes a mode's name as [ParseMode] does.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
