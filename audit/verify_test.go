package audit_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/audit"
)

func TestVerifyFindsChangedMovedAndMissingLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, path, nil, 0, 6)
	orig := rawLines(t, path)
	edit := func(lines [][]byte) [][]byte { // copies
		out := make([][]byte, len(lines))
		for i := range lines {
			out[i] = bytes.Clone(lines[i])
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		mutate   func([][]byte) [][]byte
		line     int
		is       error
		mentions string
	}{
		{"one byte of line 3 changed", func(l [][]byte) [][]byte {
			l = edit(l)
			i := bytes.Index(l[2], []byte("tool2"))
			l[2][i] = 'T'
			return l
		}, 4, audit.ErrBrokenChain, "line 3 was changed"},
		{"lines 3 and 4 swapped", func(l [][]byte) [][]byte {
			l = edit(l)
			l[2], l[3] = l[3], l[2]
			return l
		}, 3, audit.ErrBrokenChain, "prev is not the SHA-256 of line 2"},
		{"line 3 removed", func(l [][]byte) [][]byte {
			return append(edit(l[:2]), edit(l[3:])...)
		}, 3, audit.ErrBrokenChain, "removed"},
		{"line 2 repeated", func(l [][]byte) [][]byte {
			l = edit(l)
			return append(l[:3:3], append([][]byte{l[1]}, l[3:]...)...)
		}, 4, audit.ErrBrokenChain, "line 3"},
		{"first line removed", func(l [][]byte) [][]byte { return edit(l[1:]) }, 1, audit.ErrBrokenChain, "genesis"},
		{"garbage line inserted", func(l [][]byte) [][]byte {
			l = edit(l)
			return append(l[:2:2], append([][]byte{[]byte("not json")}, l[2:]...)...)
		}, 3, audit.ErrNotEvent, ""},
		{"unchained line inserted", func(l [][]byte) [][]byte {
			l = edit(l)
			legacy, _ := json.Marshal(testEvent(9))
			return append(l[:2:2], append([][]byte{legacy}, l[2:]...)...)
		}, 3, audit.ErrBrokenChain, "no prev member"},
		{"prev written in upper case", func(l [][]byte) [][]byte {
			l = edit(l)
			n := len(l[2]) - 66 // 64 hex digits and "}
			l[2] = append(l[2][:n], bytes.ToUpper(orig[2][n:])...)
			return l
		}, 3, audit.ErrBrokenChain, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := verifyBytes(joinLines(tc.mutate(orig)), nil)
			var le *audit.LineError
			if !errors.As(err, &le) || le.Line != tc.line || !errors.Is(err, tc.is) {
				t.Fatalf("Verify = %v, want a line %d error wrapping %v", err, tc.line, tc.is)
			}
			if !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("error %q does not mention %q", err, tc.mentions)
			}
			if rep.Lines != tc.line-1 {
				t.Errorf("Report.Lines = %d, want the %d lines before the bad one", rep.Lines, tc.line-1)
			}
		})
	}
}

func TestVerifyCannotSeeChangesAtTheEndOfAnUnsignedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, path, nil, 0, 4)
	lines := rawLines(t, path)

	if rep, err := verifyBytes(joinLines(lines[:3]), nil); err != nil || rep.Lines != 3 {
		t.Errorf("last line removed: Verify = %+v, %v; want 3 intact lines (undetectable)", rep, err)
	}
	last := bytes.Replace(bytes.Clone(lines[3]), []byte("tool3"), []byte("TOOL3"), 1)
	if _, err := verifyBytes(joinLines(append(lines[:3:3], last)), nil); err != nil {
		t.Errorf("last line changed: Verify = %v; want nil (undetectable without a signature)", err)
	}

	// A torn last line is visible, though: it has no newline.
	torn := joinLines(lines)
	torn = torn[:len(torn)-10]
	var le *audit.LineError
	if _, err := verifyBytes(torn, nil); !errors.As(err, &le) || le.Line != 4 || !errors.Is(err, audit.ErrIncomplete) {
		t.Errorf("torn last line: Verify = %v, want line 4 incomplete", err)
	}
}

func rechain(lines [][]byte, from int) {
	for i := from; i < len(lines); i++ {
		m := unsignedLine.FindSubmatchIndex(lines[i])
		if m == nil {
			m = signedLine.FindSubmatchIndex(lines[i])[4:6]
		} else {
			m = m[2:4]
		}
		prev := zeros
		if i > 0 {
			prev = sha(lines[i-1])
		}
		copy(lines[i][m[0]:m[1]], prev)
	}
}

func TestVerifySignaturesCatchWhatTheChainAloneCannot(t *testing.T) {
	pub, priv := newKey(t)
	otherPub, _ := newKey(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, path, &audit.FileSinkOptions{SigningKey: priv}, 0, 4)
	orig := rawLines(t, path)
	changed := func(line int) [][]byte {
		l := make([][]byte, len(orig))
		for i := range orig {
			l[i] = bytes.Clone(orig[i])
		}
		l[line-1] = bytes.Replace(l[line-1], []byte(fmt.Sprintf("tool%d", line-1)), []byte("toolX"), 1)
		return l
	}

	var le *audit.LineError
	// A changed middle line is named itself, not the line after it.
	if _, err := verifyBytes(joinLines(changed(2)), pub); !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, audit.ErrBadSignature) {
		t.Errorf("line 2 changed: Verify = %v, want a bad signature on line 2", err)
	}
	// So is a changed last line.
	if _, err := verifyBytes(joinLines(changed(4)), pub); !errors.As(err, &le) || le.Line != 4 || !errors.Is(err, audit.ErrBadSignature) {
		t.Errorf("line 4 changed: Verify = %v, want a bad signature on line 4", err)
	}
	// A changed line with the chain recomputed after it passes the chain
	// check alone, but not the signatures.
	forged := changed(2)
	rechain(forged, 2)
	if _, err := verifyBytes(joinLines(forged), nil); err != nil {
		t.Errorf("recomputed chain without a key: Verify = %v; want nil (the chain alone cannot tell)", err)
	}
	if _, err := verifyBytes(joinLines(forged), pub); !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, audit.ErrBadSignature) {
		t.Errorf("recomputed chain with the key: Verify = %v, want a bad signature on line 2", err)
	}
	// Another key verifies nothing.
	if _, err := verifyBytes(joinLines(orig), otherPub); !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, audit.ErrBadSignature) {
		t.Errorf("other key: Verify = %v, want a bad signature on line 1", err)
	}
	// A key demands signatures: an unsigned file fails on its first line.
	unsigned := filepath.Join(t.TempDir(), "unsigned.jsonl")
	writeEvents(t, unsigned, nil, 0, 2)
	data, _ := os.ReadFile(unsigned)
	if _, err := verifyBytes(data, pub); !errors.As(err, &le) || le.Line != 1 || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("unsigned file with a key: Verify = %v, want line 1 not signed", err)
	}
}

func TestVerifyReportsFilesWrittenBeforeChaining(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	var legacy [][]byte
	for i := range 3 {
		l, _ := json.Marshal(testEvent(i))
		legacy = append(legacy, l)
	}
	if err := os.WriteFile(path, joinLines(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := verifyBytes(joinLines(legacy), nil)
	if !errors.Is(err, audit.ErrUnchained) || !strings.Contains(err.Error(), "before toolwire hash-chained") || rep.Lines != 3 || rep.Unchained != 3 {
		t.Errorf("old file: Verify = %+v, %v; want ErrUnchained over 3 lines", rep, err)
	}

	// Appending to such a file chains from its last line.
	writeEvents(t, path, nil, 3, 5)
	lines := rawLines(t, path)
	rep, err = verifyBytes(joinLines(lines), nil)
	if err != nil || rep.Lines != 5 || rep.Unchained != 3 {
		t.Fatalf("old file, then chained: Verify = %+v, %v; want 5 lines, 3 unchained", rep, err)
	}
	if m := unsignedLine.FindSubmatch(lines[3]); m == nil || string(m[1]) != sha(lines[2]) {
		t.Errorf("first chained line does not carry the hash of the last old one: %s", lines[3])
	}
	// The old lines are unprotected, but for the last one.
	lines[0] = bytes.Replace(lines[0], []byte("tool0"), []byte("TOOL0"), 1)
	if _, err := verifyBytes(joinLines(lines), nil); err != nil {
		t.Errorf("old line 1 changed: Verify = %v, want nil (not protected)", err)
	}
	lines[2] = bytes.Replace(lines[2], []byte("tool2"), []byte("TOOL2"), 1)
	var le *audit.LineError
	if _, err := verifyBytes(joinLines(lines), nil); !errors.As(err, &le) || le.Line != 4 {
		t.Errorf("old line 3 changed: Verify = %v, want line 4 to break", err)
	}
}

func TestVerifyEmptyFileIsIntactAndEmpty(t *testing.T) {
	rep, err := verifyBytes(nil, nil)
	if err != nil || rep != (audit.Report{}) {
		t.Errorf("Verify(empty) = %+v, %v", rep, err)
	}
}

func TestVerifyRejectsAPublicKeyOfTheWrongSize(t *testing.T) {
	if _, err := verifyBytes([]byte("{}\n"), ed25519.PublicKey("short")); err == nil {
		t.Error("Verify with a 5-byte public key succeeded")
	}
}

// fuzzFile is a file of four signed lines, and the key's public half.
func fuzzFile(tb testing.TB) ([][]byte, ed25519.PublicKey) {
	tb.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	path := filepath.Join(tb.TempDir(), "audit.jsonl")
	s, err := audit.OpenFileWith(path, &audit.FileSinkOptions{SigningKey: priv})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 4 {
		if err := s.Write(testEvent(i)); err != nil {
			tb.Fatal(err)
		}
	}
	s.Close()
	data, _ := os.ReadFile(path)
	return bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'}), priv.Public().(ed25519.PublicKey)
}

// FuzzVerifyFindsEveryByteChanged changes one byte of a valid signed file.
// With the public key Verify must always notice; without it, it must notice
// unless the change is in the last line, which nothing follows.
func FuzzVerifyFindsEveryByteChanged(f *testing.F) {
	lines, pub := fuzzFile(f)
	f.Add(uint8(0), uint16(0), byte('x'))
	f.Add(uint8(1), uint16(40), byte('A'))
	f.Add(uint8(2), uint16(400), byte('\n'))
	f.Add(uint8(3), uint16(1000), byte('='))
	f.Add(uint8(3), uint16(len(lines[3])-5), byte(0)) // last sig character, before "=="
	f.Fuzz(func(t *testing.T, line uint8, off uint16, b byte) {
		l := int(line) % len(lines)
		o := int(off) % len(lines[l])
		if lines[l][o] == b {
			return
		}
		changed := make([][]byte, len(lines))
		for i := range lines {
			changed[i] = bytes.Clone(lines[i])
		}
		changed[l][o] = b
		data := joinLines(changed)
		if _, err := verifyBytes(data, pub); err == nil {
			t.Errorf("line %d byte %d set to %q: Verify with the key found nothing", l+1, o, b)
		}
		if _, err := verifyBytes(data, nil); err == nil && l != len(lines)-1 {
			t.Errorf("line %d byte %d set to %q: Verify without a key found nothing", l+1, o, b)
		}
	})
}

// FuzzVerify feeds Verify arbitrary files: it must not panic, must not
// count more lines than there are, and must find every file it accepts
// without an error ending in a newline.
func FuzzVerify(f *testing.F) {
	lines, _ := fuzzFile(f)
	f.Add(joinLines(lines))
	f.Add(joinLines(lines[1:]))
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"prev":"` + zeros + `"}` + "\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := verifyBytes(data, nil)
		if n := bytes.Count(data, []byte{'\n'}); rep.Lines > n {
			t.Errorf("Report.Lines = %d in a file of %d newlines", rep.Lines, n)
		}
		if err == nil && len(data) > 0 && (data[len(data)-1] != '\n' || rep.Head == "") {
			t.Errorf("accepted %q with Report %+v", data, rep)
		}
	})
}

func TestKeyFilesRoundTrip(t *testing.T) {
	pub, priv := newKey(t)
	dir := t.TempDir()
	privPEM, err := audit.MarshalPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := audit.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(privPEM, []byte("-----BEGIN PRIVATE KEY-----\n")) || !bytes.HasPrefix(pubPEM, []byte("-----BEGIN PUBLIC KEY-----\n")) {
		t.Errorf("PEM headers:\n%s%s", privPEM, pubPEM)
	}
	privPath, pubPath := filepath.Join(dir, "k.key"), filepath.Join(dir, "k.pub")
	os.WriteFile(privPath, privPEM, 0o600)
	os.WriteFile(pubPath, pubPEM, 0o644)
	gotPriv, err := audit.ReadPrivateKey(privPath)
	if err != nil || !gotPriv.Equal(priv) {
		t.Errorf("ReadPrivateKey = %v, %v", gotPriv, err)
	}
	gotPub, err := audit.ReadPublicKey(pubPath)
	if err != nil || !gotPub.Equal(pub) {
		t.Errorf("ReadPublicKey = %v, %v", gotPub, err)
	}

	// Each reader wants its own kind of block.
	swapped := filepath.Join(dir, "swapped")
	os.WriteFile(swapped, pubPEM, 0o600)
	if _, err := audit.ReadPrivateKey(swapped); err == nil || !strings.Contains(err.Error(), `"PUBLIC KEY"`) {
		t.Errorf("ReadPrivateKey(public key file) = %v", err)
	}
	if _, err := audit.ReadPublicKey(privPath); err == nil || !strings.Contains(err.Error(), `"PRIVATE KEY"`) {
		t.Errorf("ReadPublicKey(private key file) = %v", err)
	}
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not pem"), 0o600)
	if _, err := audit.ReadPublicKey(garbage); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("ReadPublicKey(garbage) = %v, want an error naming the file", err)
	}
}

func TestReadPrivateKeyRefusesAFileOthersCanRead(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX permissions")
	}
	_, priv := newKey(t)
	path := filepath.Join(t.TempDir(), "k.key")
	data, _ := audit.MarshalPrivateKey(priv)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.ReadPrivateKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("ReadPrivateKey(mode 0640) = %v, want a refusal", err)
	}
}
