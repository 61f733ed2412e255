package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// ApprovalKey is what a lasting approval of a call is bound to: who
// called, which tool as it was defined, with which arguments, under which
// policy. A changed tool definition, other arguments (for an approval of
// these arguments) or changed policy rules need a new approval.
type ApprovalKey struct {
	// Caller is the call's identity ([IdentityFrom]); "" for the person
	// at the terminal.
	Caller string `json:"caller"`
	// Tool is the registered name.
	Tool string `json:"tool"`
	// Definition is the SHA-256 (hex) of the tool's definition as the
	// executor sees it: name, description, input schema, tier and origin.
	Definition string `json:"definition"`
	// Args is the SHA-256 (hex) of the validated arguments.
	Args string `json:"args"`
	// Policy is the executor's policy's revision ("" without a policy, or
	// one that has none).
	Policy string `json:"policy"`
}

// Approvals are lasting approvals a person gave (package approval keeps
// them in a file). The executor asks them before it asks its confirmer:
// a call one covers runs without asking anyone, and its
// confirmation.accepted event names the approval. Approved is called
// concurrently.
type Approvals interface {
	// Approved returns the ID of an unexpired approval that covers key,
	// or "" when none does. An error is treated as none.
	Approved(ctx context.Context, key ApprovalKey) (id string, err error)
}

// Revisioned is a [Policy] whose rules have a revision, which lasting
// approvals are bound to.
type Revisioned interface {
	Revision() string
}

// approvalKey returns the key of call p.
func (b *batch) approvalKey(p *pending) ApprovalKey {
	k := ApprovalKey{Caller: b.caller, Tool: p.tool.Name, Definition: Definition(p.tool), Args: hashHex(p.args)}
	if r, ok := b.ex.Policy().(Revisioned); ok {
		k.Policy = r.Revision()
	}
	return k
}

// Definition returns the SHA-256 (hex) of t's definition: what a lasting
// approval of a call to t is bound to.
func Definition(t *Tool) string {
	raw, _ := json.Marshal(struct {
		Name, Description string
		Schema            json.RawMessage
		Tier              string
		Source, Original  string
	}{t.Name, t.Description, t.Schema(), t.Tier.String(), t.Origin.Source, t.Origin.Name})
	return hashHex(raw)
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
