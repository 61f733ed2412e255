package tool

import "fmt"

// Tier is a tool's risk tier. It decides whether a call needs confirmation.
//
// Tiers come from the operator's configuration, never from a tool's source: a
// source may raise a tier (see [Tier.Raise]) but never lower it. The zero
// value is not a valid tier, so a tool whose tier was never set cannot be
// registered.
type Tier uint8

const (
	// Read tools only observe; they run without confirmation.
	Read Tier = iota + 1
	// Write tools change state; a call is confirmed before it runs.
	Write
	// Destructive tools change state in ways that may not be undone; a call
	// is confirmed before it runs.
	Destructive
)

var tierNames = [...]string{Read: "read", Write: "write", Destructive: "destructive"}

// ParseTier returns the tier named s: "read", "write" or "destructive".
// Any other string is an error; there is no default.
func ParseTier(s string) (Tier, error) {
	for t := Read; t <= Destructive; t++ {
		if tierNames[t] == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tier %q (want read, write or destructive)", s)
}

// Valid reports whether t is one of the three tiers.
func (t Tier) Valid() bool { return t >= Read && t <= Destructive }

// String returns the tier's name, or "invalid(N)" for an invalid tier.
func (t Tier) String() string {
	if !t.Valid() {
		return fmt.Sprintf("invalid(%d)", uint8(t))
	}
	return tierNames[t]
}

// NeedsConfirmation reports whether a call to a tool of this tier must be
// confirmed before it runs. An invalid tier needs confirmation: unknown means no.
func (t Tier) NeedsConfirmation() bool { return t != Read }

// Raise returns the higher of t and other. Sources use it to let a hint
// strengthen the operator's tier without ever weakening it.
func (t Tier) Raise(other Tier) Tier {
	if other.Valid() && other > t {
		return other
	}
	return t
}

// TierSource says where a tool's tier came from, for the people who read
// tool listings: whether anybody chose it.
type TierSource string

const (
	// TierDefault: nobody chose; the tier is the source's default (for an
	// MCP server, its file's: see config.DefaultTierFor).
	TierDefault TierSource = "default"
	// TierOperator: the operator's default tier for the source
	// (defaultTier).
	TierOperator TierSource = "defaultTier"
	// TierOverride: the operator's tier for this tool (tierOverrides).
	TierOverride TierSource = "override"
	// TierHint: raised by the source's own hint (an MCP server's
	// destructiveHint) above what the operator's configuration gave.
	TierHint TierSource = "hint"
)

// MarshalText encodes the tier as its name.
func (t Tier) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("invalid tier %d", uint8(t))
	}
	return []byte(tierNames[t]), nil
}

// UnmarshalText decodes a tier from its name.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
