package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// ErrUnchained is returned by [Verify] for a file none of whose lines
// carries a hash chain: one written before toolwire chained its audit
// lines, or by something else. Nothing in it can be verified.
var ErrUnchained = errors.New("no line carries a prev hash: the file was written before toolwire hash-chained its audit log, so nothing in it can be verified")

// VerifyOptions configures [Verify]. The zero value is usable.
type VerifyOptions struct {
	// PublicKey, if set, requires every chained line to carry a signature
	// that this key verifies (see [ReadPublicKey]).
	PublicKey ed25519.PublicKey
}

// Report says how much of an audit file [Verify] found intact.
type Report struct {
	// Lines is the number of lines that passed: all of them when Verify
	// returns nil, those before the bad line otherwise.
	Lines int
	// Intact is how many of them are known unchanged: Lines, except when
	// the bad line's prev does not match the line before it, which may be
	// the changed one; then the lines before that.
	Intact int
	// Unchained counts the leading lines that have no prev member, written
	// before chaining. The chain does not protect them, except the last of
	// them, whose hash the first chained line carries.
	Unchained int
	// Signed counts the lines whose signature VerifyOptions.PublicKey
	// verified.
	Signed int
	// Head is the SHA-256 of the last intact line in hex, the prev the
	// next line must carry; "" when there is none. The file alone cannot
	// show that lines were cut from its end: keeping Head and Lines
	// elsewhere can.
	Head string
}

// Verify reads an audit file written by [FileSink] and checks its hash
// chain, and with opts.PublicKey set its signatures, up to the first line
// that fails. That line is reported as a [*LineError] wrapping
// [ErrIncomplete], [ErrNotEvent], [ErrBrokenChain] or [ErrBadSignature];
// a file with no chained line at all yields [ErrUnchained]. The Report
// says how many lines were intact before the failure, or in all.
//
// What the chain shows: a line changed, removed, inserted or moved breaks
// the prev of the line after it, so any such change before the last line
// is found. It cannot show that lines were cut from the end, nor a change
// to the last line, unless the line is signed. Without signatures anyone
// able to write the file can also recompute the chain after a change;
// signing with a key they cannot read prevents that.
func Verify(r io.Reader, opts *VerifyOptions) (Report, error) {
	var pub ed25519.PublicKey
	if opts != nil && opts.PublicKey != nil {
		if len(opts.PublicKey) != ed25519.PublicKeySize {
			return Report{}, fmt.Errorf("public key has %d bytes, want an Ed25519 key of %d", len(opts.PublicKey), ed25519.PublicKeySize)
		}
		pub = opts.PublicKey
	}
	var (
		rep     Report
		prev    = genesis
		chained bool // whether a line with prev has been seen
		buf     []byte
		wantHex = make([]byte, 2*sha256.Size)
		br      = bufio.NewReaderSize(r, 64<<10)
	)
	done := func(err error) (Report, error) {
		if rep.Lines > 0 {
			rep.Head = hex.EncodeToString(prev[:])
		}
		rep.Intact = rep.Lines
		return rep, err
	}
	for n := 1; ; n++ {
		line, complete, err := readLine(br, &buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return done(fmt.Errorf("reading line %d: %w", n, err))
		}
		if !complete {
			if len(line) == 0 {
				break
			}
			return done(&LineError{Line: n, Err: ErrIncomplete})
		}
		if !isEvent(line) {
			return done(&LineError{Line: n, Err: ErrNotEvent})
		}
		gotHex, sig, signed, ok := chainFields(line)
		switch {
		case !ok && sig != nil:
			return done(&LineError{Line: n, Err: fmt.Errorf("%w: a sig member without a prev member before it", ErrNotEvent)})
		case !ok && chained && bytes.Contains(line, []byte(`"prev":`)):
			return done(&LineError{Line: n, Err: fmt.Errorf("%w: its prev member is not as toolwire writes it (the last member, before any sig, with 64 lower-case hex digits)", ErrBrokenChain)})
		case !ok && chained:
			return done(&LineError{Line: n, Err: fmt.Errorf("%w: no prev member, although earlier lines have one (a line added by hand, or by a toolwire that does not chain)", ErrBrokenChain)})
		case !ok:
			rep.Unchained++
		default:
			chained = true
			if pub != nil {
				if err := checkSignature(pub, signed, sig); err != nil {
					return done(&LineError{Line: n, Err: err})
				}
				rep.Signed++
			}
			hex.Encode(wantHex, prev[:])
			if !bytes.Equal(gotHex, wantHex) {
				rep, err := done(&LineError{Line: n, Err: brokenLink(n)})
				rep.Intact = max(n-2, 0) // line n-1 may be the one changed
				return rep, err
			}
		}
		prev = sha256.Sum256(line)
		rep.Lines++
	}
	if rep.Lines > 0 && !chained {
		return done(ErrUnchained)
	}
	return done(nil)
}

// brokenLink describes a prev mismatch on line n. Which of the causes it
// was, the chain cannot tell: a changed line and a removed one look alike.
func brokenLink(n int) error {
	if n == 1 {
		return fmt.Errorf("%w: prev is not the genesis value (64 zeros): lines were removed from the start of the file, or this one was changed", ErrBrokenChain)
	}
	return fmt.Errorf("%w: prev is not the SHA-256 of line %d: line %d was changed, or lines were removed, inserted or reordered between lines %d and %d", ErrBrokenChain, n-1, n-1, n-1, n)
}

func checkSignature(pub ed25519.PublicKey, signed, sig []byte) error {
	if sig == nil {
		return fmt.Errorf("%w: the line is not signed", ErrBadSignature)
	}
	var raw [ed25519.SignatureSize + 2]byte // room for a malformed encoding
	n, err := sigEncoding.Decode(raw[:], sig)
	if err != nil || n != ed25519.SignatureSize || !ed25519.Verify(pub, signed, raw[:n]) {
		return fmt.Errorf("%w: the signature does not match the line and the public key (the line was changed, or signed with another key)", ErrBadSignature)
	}
	return nil
}

// readLine returns the next line without its newline, and whether it had
// one. The line is valid until the next call; *buf is reused for lines
// longer than the reader's buffer.
func readLine(br *bufio.Reader, buf *[]byte) ([]byte, bool, error) {
	frag, err := br.ReadSlice('\n')
	if err == nil {
		return frag[:len(frag)-1], true, nil
	}
	*buf = append((*buf)[:0], frag...)
	for errors.Is(err, bufio.ErrBufferFull) {
		frag, err = br.ReadSlice('\n')
		*buf = append(*buf, frag...)
	}
	if err == nil {
		return (*buf)[:len(*buf)-1], true, nil
	}
	return *buf, false, err
}
