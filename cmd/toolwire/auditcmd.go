package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/store"
)

func newAuditCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify an audit log's hash chain, and make keys to sign it",
		Long: `Every line of toolwire's audit log carries the SHA-256 of the line before it
("prev"), and, with a signing key, an Ed25519 signature ("sig"); with a
PostgreSQL store, every row of its audit table does. "audit verify" checks
both; "audit keygen" makes a key pair to sign with.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAuditVerifyCommand(e, g), newAuditKeygenCommand(e))
	return cmd
}

func newAuditVerifyCommand(e *env, g *globalFlags) *cobra.Command {
	var publicKey string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [FILE]",
		Short: "Check an audit log's hash chain (and signatures) and name the first bad line or row",
		Long: `Check that every line of an audit log carries the hash of the line before it,
and with --public-key that every line is signed by the matching private key.
Prints "FILE: N events, chain intact" and the SHA-256 of the last line, or
fails naming the first line that is not intact.

A line changed, removed, inserted or moved is found. Lines cut from the end
of the file are not, nor (without signatures) a change to the last line:
keep the printed last-line hash elsewhere to check for that later. Without
signatures, someone able to rewrite the file can also recompute the chain
after their change; a signing key they cannot read stops that.

Without FILE, the store's audit log is verified: with a PostgreSQL store
(--store, $TOOLWIRE_STORE or the configuration's store) the audit table
every replica appends to: each process's chain in its order, naming the
first bad row as "row N" (its seq) with its place in its chain; each
chain's last row is then compared with the head row its process keeps,
so rows cut from a chain's end are found too. With the files of one
machine, the audit file (--audit, or audit.file).

Beside the chain's state it counts the calls: how many were requested
(call.requested), their outcomes by kind (call.executed, call.errored,
call.refused, validation.failed, confirmation.rejected), and how many
requested calls have no outcome, or more than one. --json prints all of
it as one JSON object (with "intact": false and the error when the chain
is broken).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts audit.VerifyOptions
			if publicKey != "" {
				key, err := audit.ReadPublicKey(publicKey)
				if err != nil {
					return &exitError{exitUsage, err}
				}
				opts.PublicKey = key
			}
			path := ""
			if len(args) == 1 {
				path = args[0]
			} else {
				file, err := optionalConfig(e, g)
				if err != nil {
					return err
				}
				st, _, err := openStore(cmd.Context(), e, g, file, false)
				if err != nil {
					return err
				}
				defer st.Close()
				if st.Kind() == store.Postgres {
					return verifyTable(cmd.Context(), e, st, &opts, asJSON)
				}
				if path = firstNonEmpty(g.audit, file.Audit.File); path == "" {
					return &exitError{exitUsage, errors.New("audit verify: give FILE: the store is the files of one machine and neither --audit nor audit.file names an audit file")}
				}
			}
			f, err := os.Open(path)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			defer f.Close()
			calls := newCallCount()
			rep, err := audit.Verify(io.TeeReader(f, calls), &opts)
			switch {
			case errors.Is(err, audit.ErrUnchained):
				err = fmt.Errorf("%s: %d events, none hash-chained: the file was written before toolwire hash-chained its audit log, so nothing in it can be verified", path, rep.Lines)
			case err != nil && rep.Lines == 0:
				err = fmt.Errorf("%s: %w", path, err)
			case err != nil:
				err = fmt.Errorf("%s: %w; %s", path, err, intactBefore(rep.Intact))
			}
			if err != nil {
				if asJSON {
					writeVerifyJSON(e, path, rep, opts.PublicKey != nil, nil, err)
				}
				return &exitError{exitToolErr, err}
			}
			if asJSON {
				return writeVerifyJSON(e, path, rep, opts.PublicKey != nil, calls, nil)
			}
			msg := fmt.Sprintf("%s: %d events, chain intact", path, rep.Lines)
			if rep.Unchained > 0 {
				msg += fmt.Sprintf(" from line %d (%s older, unprotected)", rep.Unchained+1, lineRange(rep.Unchained))
			}
			if opts.PublicKey != nil {
				msg += ", every chained line signed by the key"
			}
			fmt.Fprintln(e.stdout, msg)
			if rep.Head != "" {
				fmt.Fprintf(e.stdout, "last line sha256: %s\n", rep.Head)
			}
			fmt.Fprintln(e.stdout, calls.String())
			return nil
		},
	}
	cmd.Flags().StringVar(&publicKey, "public-key", "", "PEM file with the Ed25519 public key (PKIX) that must have signed every line")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	return cmd
}

func newAuditKeygenCommand(e *env) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "keygen --out PREFIX",
		Short: "Make an Ed25519 key pair for signing the audit log",
		Long: `Write a new Ed25519 private key to PREFIX.key (PEM, PKCS#8, mode 0600) and its
public key to PREFIX.pub (PEM, PKIX). Neither file may exist yet. The writer
signs with the private key; "audit verify --public-key PREFIX.pub" checks.
Keep the private key where the agents whose calls are audited cannot read it.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if prefix == "" {
				return &exitError{exitUsage, errors.New("--out PREFIX is required")}
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return &exitError{exitToolErr, fmt.Errorf("generating a key: %w", err)}
			}
			privPEM, err := audit.MarshalPrivateKey(priv)
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			pubPEM, err := audit.MarshalPublicKey(pub)
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			privPath, pubPath := prefix+".key", prefix+".pub"
			for _, p := range []string{privPath, pubPath} {
				if _, err := os.Lstat(p); err == nil {
					return &exitError{exitUsage, fmt.Errorf("%s already exists; not overwriting a key", p)}
				}
			}
			if err := writeNewFile(privPath, privPEM, 0o600); err != nil {
				return &exitError{exitToolErr, err}
			}
			if err := writeNewFile(pubPath, pubPEM, 0o644); err != nil {
				os.Remove(privPath)
				return &exitError{exitToolErr, err}
			}
			fmt.Fprintf(e.stderr, "wrote %s (private: keep it from the agents) and %s (public: give it to verifiers)\n", privPath, pubPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "out", "", "write PREFIX.key and PREFIX.pub")
	return cmd
}

// verifyTable verifies a PostgreSQL store's audit table and says so as
// verify does for a file, in rows.
func verifyTable(ctx context.Context, e *env, st *store.Store, opts *audit.VerifyOptions, asJSON bool) error {
	where := "PostgreSQL " + st.String()
	rep, err := st.VerifyAudit(ctx, opts)
	if err := tableError(where, rep, err); err != nil {
		if asJSON {
			writeVerifyJSON(e, where, rep, opts.PublicKey != nil, nil, err.err)
		}
		return err
	}
	calls := newCallCount()
	if err := st.AuditLines(ctx, func(line []byte) error { calls.add(line); return nil }); err != nil {
		return &exitError{exitToolErr, fmt.Errorf("%s: count the calls: %w", where, err)}
	}
	if asJSON {
		return writeVerifyJSON(e, where, rep, opts.PublicKey != nil, calls, nil)
	}
	msg := fmt.Sprintf("%s: %d events, every chain intact to its head row", where, rep.Lines)
	if rep.Unchained > 0 {
		msg += fmt.Sprintf(" from row %d (%d older, unprotected)", rep.Unchained+1, rep.Unchained)
	}
	if opts.PublicKey != nil {
		msg += ", every chained row signed by the key"
	}
	fmt.Fprintln(e.stdout, msg)
	if rep.Head != "" {
		fmt.Fprintf(e.stdout, "last row sha256: %s\n", rep.Head)
	}
	fmt.Fprintln(e.stdout, calls.String())
	return nil
}

// tableError says what VerifyAudit's err means for the audit table, as
// verify does for a file, in rows; nil when the chain is intact.
func tableError(where string, rep audit.Report, err error) *exitError {
	var re *store.RowError
	switch {
	case errors.Is(err, audit.ErrUnchained):
		return &exitError{exitToolErr, fmt.Errorf("%s: %d events, none hash-chained", where, rep.Lines)}
	case errors.As(err, &re) && errors.Is(err, store.ErrHeadMismatch):
		// The row error's own text would name the last row, which is
		// not the one at fault.
		return &exitError{exitToolErr, fmt.Errorf("%s: chain %d: %d rows, each chained to the one before, but %w (toolwire.audit_chains): rows were removed from its end, or its head was changed",
			where, re.Chain, rep.Lines, re.Err)}
	case errors.As(err, &re) && errors.Is(re.Err, audit.ErrBrokenChain) && rep.Lines > 0:
		// The audit package's words count lines of a file.
		return &exitError{exitToolErr, fmt.Errorf("%s: row %d (row %d of chain %d): %w: its prev is not the SHA-256 of the row before it in its chain: that row was changed, or rows were removed, inserted or reordered before this one; %s",
			where, re.Seq, re.ChainRow, re.Chain, audit.ErrBrokenChain, rowsIntact(rep.Intact))}
	case errors.As(err, &re):
		return &exitError{exitToolErr, fmt.Errorf("%s: row %d (row %d of chain %d): %w; %s", where, re.Seq, re.ChainRow, re.Chain, re.Err, rowsIntact(rep.Intact))}
	case err != nil:
		return &exitError{exitToolErr, fmt.Errorf("%s: %w", where, err)}
	}
	return nil
}

// callCount counts the calls of an audit log, line by line: it is an
// io.Writer of the log's bytes (a line may come in pieces), or is given
// whole lines (add).
type callCount struct {
	partial   []byte
	requested map[callKey]bool
	outcomes  map[callKey]int
	byKind    map[audit.Kind]int
	events    int
}

// callKey names one call of a batch.
type callKey struct {
	batch string
	index int
}

func newCallCount() *callCount {
	return &callCount{requested: map[callKey]bool{}, outcomes: map[callKey]int{}, byKind: map[audit.Kind]int{}}
}

func (c *callCount) Write(p []byte) (int, error) {
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		c.add(c.partial[:i])
		c.partial = c.partial[i+1:]
	}
}

// add counts one line; a line that is not an event is left out (the
// chain's verification says what is wrong with it).
func (c *callCount) add(line []byte) {
	var ev audit.Event
	if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &ev) != nil {
		return
	}
	c.events++
	k := callKey{ev.Batch, ev.Index}
	switch {
	case ev.Kind == audit.CallRequested:
		c.requested[k] = true
	case ev.Kind.Ends():
		c.outcomes[k]++
		c.byKind[ev.Kind]++
	}
}

// without and several count the requested calls with no outcome and
// with more than one.
func (c *callCount) without() (none, several int) {
	for k := range c.requested {
		switch n := c.outcomes[k]; {
		case n == 0:
			none++
		case n > 1:
			several++
		}
	}
	return none, several
}

// String says it for a person, on one line.
func (c *callCount) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.byKind)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.byKind[k]))
	}
	outcomes := "none"
	if len(parts) > 0 {
		outcomes = strings.Join(parts, ", ")
	}
	none, several := c.without()
	return fmt.Sprintf("calls: %d requested; outcomes: %s; requested without an outcome: %d, with more than one: %d", len(c.requested), outcomes, none, several)
}

// verifyJSON is what verify --json prints.
type verifyJSON struct {
	Source    string     `json:"source"`
	Intact    bool       `json:"intact"`
	Error     string     `json:"error,omitempty"`
	Events    int        `json:"events"`
	Unchained int        `json:"unchained"`
	Signed    *int       `json:"signed,omitempty"`
	Head      string     `json:"head,omitempty"`
	Calls     *callsJSON `json:"calls,omitempty"`
}

type callsJSON struct {
	Requested      int            `json:"requested"`
	Outcomes       map[string]int `json:"outcomes"`
	WithoutOutcome int            `json:"withoutOutcome"`
	SeveralOutcome int            `json:"severalOutcomes"`
}

// writeVerifyJSON prints the report of source as one JSON object: calls
// nil and err set when the chain is broken.
func writeVerifyJSON(e *env, source string, rep audit.Report, signed bool, calls *callCount, err error) error {
	out := verifyJSON{Source: source, Intact: err == nil, Events: rep.Lines, Unchained: rep.Unchained, Head: rep.Head}
	if err != nil {
		out.Error = err.Error()
	}
	if signed {
		out.Signed = &rep.Signed
	}
	if calls != nil {
		none, several := calls.without()
		cj := &callsJSON{Requested: len(calls.requested), Outcomes: map[string]int{}, WithoutOutcome: none, SeveralOutcome: several}
		for k, n := range calls.byKind {
			cj.Outcomes[string(k)] = n
		}
		out.Calls = cj
	}
	b, merr := json.MarshalIndent(out, "", "  ")
	if merr != nil {
		return &exitError{exitToolErr, merr}
	}
	fmt.Fprintln(e.stdout, string(b))
	return nil
}

// rowsIntact says how many rows of a chain, from its first, are known
// intact.
func rowsIntact(intact int) string {
	switch intact {
	case 0:
		return "no row before it in its chain is known intact"
	case 1:
		return "the first row of its chain is intact"
	}
	return fmt.Sprintf("the first %d rows of its chain are intact", intact)
}

// intactBefore says which lines before a bad one are known intact.
func intactBefore(intact int) string {
	if intact == 0 {
		return "no line before it is known intact"
	}
	return lineRange(intact) + " intact"
}

// lineRange names lines 1 to n.
func lineRange(n int) string {
	if n == 1 {
		return "line 1 is"
	}
	return fmt.Sprintf("lines 1-%d are", n)
}

// writeNewFile creates path, which must not exist, holding data.
func writeNewFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
