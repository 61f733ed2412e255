package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The hash chain.
//
// Every line [FileSink] writes is the event's JSON object with one member
// appended, "prev", and with a signing key a second one, "sig":
//
//	{EVENT FIELDS,"prev":"HASH"}
//	{EVENT FIELDS,"prev":"HASH","sig":"SIGNATURE"}
//
// HASH is the SHA-256 of the exact bytes of the line before it in the file,
// newline excluded (its sig included), as 64 lowercase hex digits. The
// first line of a file has the genesis value instead: 64 zeros.
//
// SIGNATURE is the Ed25519 signature of the line as it stood before "sig"
// was added, that is of the bytes {EVENT FIELDS,"prev":"HASH"}, in standard
// base64 with padding (always 88 characters).
//
// Both members always come last, in that order, and have a fixed length, so
// a verifier finds them by position from the end of the line without
// re-encoding anything: what was hashed and what was signed are bytes of
// the file, never a reconstruction.

const (
	prevKey = `,"prev":"`
	sigKey  = `,"sig":"`
	// Lengths of `,"prev":"HASH"}` and `,"sig":"SIGNATURE"}`.
	prevSuffixLen = len(prevKey) + 2*sha256.Size + 2
	sigSuffixLen  = len(sigKey) + 88 + 2
)

// genesis is the prev of a file's first line.
var genesis [sha256.Size]byte

// sigEncoding decodes signatures strictly, so that no two spellings of a
// signature both verify.
var sigEncoding = base64.StdEncoding.Strict()

// Errors a chain check can find, wrapped in a [*LineError] that says where.
var (
	// ErrIncomplete: the last line has no newline, as a torn write leaves.
	ErrIncomplete = errors.New("incomplete line: no newline at the end of the file (a torn write?)")
	// ErrNotEvent: the line is not a JSON object decoding as an event, or
	// its prev and sig members are not where and how the writer puts them.
	ErrNotEvent = errors.New("not a JSON audit event")
	// ErrBrokenChain: the line's prev is not the hash of the line before
	// it, or the line has no prev although an earlier line has.
	ErrBrokenChain = errors.New("hash chain broken")
	// ErrBadSignature: the line's signature is missing or does not verify
	// with the public key given to Verify.
	ErrBadSignature = errors.New("bad signature")
)

// LineError reports what is wrong with one line of an audit file.
type LineError struct {
	Line int   // 1-based
	Err  error // wraps one of the Err* values above
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// chainFields finds prev and sig in a line (newline excluded). signed is the
// line without its sig member (the line itself when it has none), which is
// what the signature covers; it aliases line unless the line is signed.
// ok is false when the line has no prev member at its end, i.e. was written
// before chaining, or by something else.
func chainFields(line []byte) (prev, sig, signed []byte, ok bool) {
	signed = line
	if n := len(line); n >= sigSuffixLen && bytes.Equal(line[n-sigSuffixLen:n-sigSuffixLen+len(sigKey)], []byte(sigKey)) && bytes.HasSuffix(line, []byte(`"}`)) {
		sig = line[n-sigSuffixLen+len(sigKey) : n-2]
		signed = append(line[:n-sigSuffixLen:n-sigSuffixLen], '}')
	}
	n := len(signed)
	if n < prevSuffixLen || !bytes.Equal(signed[n-prevSuffixLen:n-prevSuffixLen+len(prevKey)], []byte(prevKey)) || !bytes.HasSuffix(signed, []byte(`"}`)) {
		return nil, sig, signed, false
	}
	return signed[n-prevSuffixLen+len(prevKey) : n-2], sig, signed, true
}

// isEvent reports whether line (newline excluded) decodes as an event.
func isEvent(line []byte) bool {
	var ev Event
	return len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &ev) == nil
}

// appendChain appends prev, and a signature when key is set, to line, which
// must be one encoded event without its newline.
func appendChain(line []byte, prev *[sha256.Size]byte, key ed25519.PrivateKey) []byte {
	line = append(line[:len(line)-1], prevKey...)
	line = hex.AppendEncode(line, prev[:])
	line = append(line, '"', '}')
	if key != nil {
		sig := ed25519.Sign(key, line)
		line = append(line[:len(line)-1], sigKey...)
		line = base64.StdEncoding.AppendEncode(line, sig)
		line = append(line, '"', '}')
	}
	return line
}

// AppendChain appends the chain's members to line, one event as
// [Event.MarshalJSON] encodes it (no newline): "prev" carrying prev, the
// SHA-256 of the line before it in the chain (all zeros for the first
// line), and with key a "sig". The result is the line exactly as a
// [FileSink] would write it, newline excluded, so that a sink keeping its
// lines elsewhere (the store package's PostgreSQL table) builds the same
// chain and [Verify] checks it. line's bytes may be reused.
func AppendChain(line []byte, prev [sha256.Size]byte, key ed25519.PrivateKey) []byte {
	return appendChain(line, &prev, key)
}

// tailHash returns the hash a line appended to a file of the given size
// must carry as its prev: genesis for an empty file, else the hash of its
// last line. It reads only that line. A last line that is torn (no final
// newline) or not an event is an error naming its line number: extending
// the chain from it would vouch for bytes nobody can vouch for.
func tailHash(f io.ReaderAt, size int64) ([sha256.Size]byte, error) {
	if size == 0 {
		return genesis, nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return genesis, err
	}
	if last[0] != '\n' {
		start, err := lineStart(f, size)
		if err != nil {
			return genesis, err
		}
		return genesis, lineError(f, start, ErrIncomplete)
	}
	start, err := lineStart(f, size-1)
	if err != nil {
		return genesis, err
	}
	line := make([]byte, size-1-start)
	if _, err := f.ReadAt(line, start); err != nil {
		return genesis, err
	}
	if !isEvent(line) {
		return genesis, lineError(f, start, ErrNotEvent)
	}
	return sha256.Sum256(line), nil
}

// lineStart returns the offset just after the last newline before end, or
// 0 when there is none.
func lineStart(f io.ReaderAt, end int64) (int64, error) {
	var buf [4096]byte
	for end > 0 {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// lineError returns a *LineError for the line starting at offset start,
// counting newlines before it for its number. Only failures pay for the
// count.
func lineError(f io.ReaderAt, start int64, err error) error {
	line := 1
	var buf [32 << 10]byte
	for off := int64(0); off < start; {
		n, rerr := f.ReadAt(buf[:min(int64(len(buf)), start-off)], off)
		line += bytes.Count(buf[:n], []byte{'\n'})
		off += int64(n)
		if rerr != nil && off < start {
			return fmt.Errorf("counting lines: %w", rerr)
		}
	}
	return &LineError{Line: line, Err: err}
}
