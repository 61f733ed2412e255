package tool_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

func TestParseTierAcceptsOnlyTheThreeLowercaseNames(t *testing.T) {
	tests := []struct {
		in      string
		want    tool.Tier
		wantErr bool
	}{
		{"read", tool.Read, false},
		{"write", tool.Write, false},
		{"destructive", tool.Destructive, false},
		{"", 0, true},
		{"Read", 0, true},
		{"WRITE", 0, true},
		{" read", 0, true},
		{"read ", 0, true},
		{"admin", 0, true},
		{"invalid(0)", 0, true},
	}
	for _, tt := range tests {
		got, err := tool.ParseTier(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTier(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseTier(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "read, write or destructive") {
			t.Errorf("ParseTier(%q) error %q does not list the valid tiers", tt.in, err)
		}
	}
}

func TestTierStringNamesValidTiersAndFlagsInvalidOnes(t *testing.T) {
	tests := []struct {
		tier tool.Tier
		want string
	}{
		{tool.Read, "read"},
		{tool.Write, "write"},
		{tool.Destructive, "destructive"},
		{0, "invalid(0)"},
		{4, "invalid(4)"},
		{255, "invalid(255)"},
	}
	for _, tt := range tests {
		if got := tt.tier.String(); got != tt.want {
			t.Errorf("Tier(%d).String() = %q, want %q", uint8(tt.tier), got, tt.want)
		}
		if got, want := tt.tier.Valid(), !strings.HasPrefix(tt.want, "invalid"); got != want {
			t.Errorf("Tier(%d).Valid() = %v, want %v", uint8(tt.tier), got, want)
		}
	}
}

func TestTierRaiseNeverLowersAndIgnoresInvalidOther(t *testing.T) {
	tests := []struct {
		t, other, want tool.Tier
	}{
		{tool.Read, tool.Read, tool.Read},
		{tool.Read, tool.Write, tool.Write},
		{tool.Read, tool.Destructive, tool.Destructive},
		{tool.Write, tool.Read, tool.Write},
		{tool.Write, tool.Destructive, tool.Destructive},
		{tool.Destructive, tool.Read, tool.Destructive},
		{tool.Destructive, tool.Write, tool.Destructive},
		// An invalid hint must never change the tier, even one that
		// compares higher numerically.
		{tool.Read, 0, tool.Read},
		{tool.Read, 4, tool.Read},
		{tool.Write, 200, tool.Write},
		{tool.Destructive, 0, tool.Destructive},
	}
	for _, tt := range tests {
		if got := tt.t.Raise(tt.other); got != tt.want {
			t.Errorf("%v.Raise(%v) = %v, want %v", tt.t, tt.other, got, tt.want)
		}
	}
}

func TestTierNeedsConfirmationForEverythingButRead(t *testing.T) {
	tests := []struct {
		tier tool.Tier
		want bool
	}{
		{tool.Read, false},
		{tool.Write, true},
		{tool.Destructive, true},
		{0, true},  // unknown means confirm
		{99, true}, // unknown means confirm
	}
	for _, tt := range tests {
		if got := tt.tier.NeedsConfirmation(); got != tt.want {
			t.Errorf("%v.NeedsConfirmation() = %v, want %v", tt.tier, got, tt.want)
		}
	}
}

func TestTierTextRoundTrip(t *testing.T) {
	for _, tier := range []tool.Tier{tool.Read, tool.Write, tool.Destructive} {
		b, err := tier.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", tier, err)
		}
		if string(b) != tier.String() {
			t.Errorf("%v.MarshalText() = %q, want %q", tier, b, tier.String())
		}
		var back tool.Tier
		if err := back.UnmarshalText(b); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", b, err)
		}
		if back != tier {
			t.Errorf("round trip of %v gave %v", tier, back)
		}
	}
}

func TestTierJSONUsesNamesInsideStructs(t *testing.T) {
	type cfg struct {
		Tier tool.Tier `json:"tier"`
	}
	b, err := json.Marshal(cfg{Tier: tool.Destructive})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"tier":"destructive"}` {
		t.Errorf("marshal = %s, want {\"tier\":\"destructive\"}", b)
	}
	var c cfg
	if err := json.Unmarshal([]byte(`{"tier":"write"}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Tier != tool.Write {
		t.Errorf("unmarshal tier = %v, want write", c.Tier)
	}
	if err := json.Unmarshal([]byte(`{"tier":"admin"}`), &c); err == nil {
		t.Error("unmarshal of tier \"admin\" succeeded, want error")
	}
}

func TestTierMarshalTextRefusesInvalidTier(t *testing.T) {
	for _, tier := range []tool.Tier{0, 4, 255} {
		b, err := tier.MarshalText()
		if err == nil {
			t.Errorf("Tier(%d).MarshalText() = %q, nil; want error", uint8(tier), b)
		}
	}
	if _, err := json.Marshal(struct{ T tool.Tier }{}); err == nil {
		t.Error("json.Marshal of a zero Tier succeeded, want error")
	}
}

func TestTierUnmarshalTextErrorLeavesTierUnchanged(t *testing.T) {
	for _, in := range []string{"", "Read", "admin", "0", "invalid(1)"} {
		tier := tool.Write
		if err := tier.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("UnmarshalText(%q) succeeded, want error", in)
		}
		if tier != tool.Write {
			t.Errorf("UnmarshalText(%q) changed the tier to %v", in, tier)
		}
	}
}
