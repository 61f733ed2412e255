package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestCanonicalJSONVectors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty object", ` { } `, `{}`},
		{"empty array", "[\n]", `[]`},
		{"literals", `[ true , false , null ]`, `[true,false,null]`},
		{"whitespace everywhere", "\t{ \"b\" :\r\n[ 1 , { \"d\" : 2 , \"c\" : 3 } ] ,\n \"a\" : \"x\" }\n", `{"a":"x","b":[1,{"c":3,"d":2}]}`},
		{"arrays keep order", `[3,1,2]`, `[3,1,2]`},
		{"nested keys sorted", `{"z":{"y":1,"x":2},"a":[{"n":1,"m":2}]}`, `{"a":[{"m":2,"n":1}],"z":{"x":2,"y":1}}`},
		{"key prefix sorts first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"uppercase before lowercase", `{"b":1,"B":2,"a":3,"A":4}`, `{"A":4,"B":2,"a":3,"b":1}`},
		// UTF-16 order puts U+1F600 (high surrogate 0xD83D) before
		// U+FF01, although its code point is larger.
		{"non-ASCII keys by UTF-16 units",
			`{"\uff01":1,"😀":2,"€":3,"é":4,"z":5,"\u0080":6,"\r":7}`,
			"{\"\\r\":7,\"z\":5,\"\u0080\":6,\"é\":4,\"€\":3,\"😀\":2,\"！\":1}"},
		{"escaped key sorts by its value", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},

		{"string unchanged", `"hello"`, `"hello"`},
		{"short escapes kept", `"\b\t\n\f\r\"\\"`, `"\b\t\n\f\r\"\\"`},
		{"unicode escapes of short forms", `"\u0008\u0009\u000A\u000c\u000D\u0022\u005C"`, `"\b\t\n\f\r\"\\"`},
		{"other controls as lowercase \\u00xx", `"\u0000\u0001\u001F\u000B"`, `"\u0000\u0001\u001f\u000b"`},
		{"solidus unescaped", `"a\/b/c"`, `"a/b/c"`},
		{"U+2028 and U+2029 raw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"DEL raw", `"\u007f"`, "\"\x7f\""},
		{"HTML characters raw", `"\u003c\u003e\u0026"`, `"<>&"`},
		{"non-ASCII escapes decoded", `"\u00e9\u20AC"`, `"é€"`},
		{"surrogate pair decoded", `"\ud83d\ude00"`, `"😀"`},
		{"raw UTF-8 kept", `"día 😀"`, `"día 😀"`},

		{"integer", `42`, `42`},
		{"one point zero", `1.0`, `1`},
		{"negative zero", `-0`, `0`},
		{"negative zero float", `-0.0e10`, `0`},
		{"exponent form of an integer", `1E2`, `100`},
		{"fraction", `12.50`, `12.5`},
		{"negative fraction", `-1.5`, `-1.5`},
		{"plain up to 1e21", `1e20`, `100000000000000000000`},
		{"digits then zeros", `123456789012345678901`, `123456789012345680000`},
		{"exponent from 1e21", `1e21`, `1e+21`},
		{"exponent with fraction", `1.5e21`, `1.5e+21`},
		{"0.000001 plain", `0.000001`, `0.000001`},
		{"1.2e-6 plain", `1.2e-6`, `0.0000012`},
		{"1e-7 exponent", `1e-7`, `1e-7`},
		{"1.5e-7 exponent", `0.00000015`, `1.5e-7`},
		{"small exponent", `123e-20`, `1.23e-18`},
		{"shortest round trip", `0.1`, `0.1`},
		{"three tenths", `0.30000000000000004`, `0.30000000000000004`},
		{"largest double", `1.7976931348623157e308`, `1.7976931348623157e+308`},
		{"smallest subnormal", `5e-324`, `5e-324`},
		{"underflow rounds to zero", `1e-400`, `0`},
		{"2^53", `9007199254740992`, `9007199254740992`},
		// The documented consequence of reading numbers as doubles.
		{"2^53+1 loses precision", `9007199254740993`, `9007199254740992`},
		{"trailing fraction zeros", `100.000`, `100`},
		{"numbers in an object", `{"n":-0.0,"m":1e+1}`, `{"m":10,"n":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("CanonicalJSON(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONRefuses(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
	}{
		{"empty input", ``, ErrSyntax},
		{"only whitespace", " \n", ErrSyntax},
		{"unterminated object", `{"a":1`, ErrSyntax},
		{"trailing comma in array", `[1,]`, ErrSyntax},
		{"trailing comma in object", `{"a":1,}`, ErrSyntax},
		{"missing colon", `{"a" 1}`, ErrSyntax},
		{"unquoted key", `{a:1}`, ErrSyntax},
		{"single quotes", `'a'`, ErrSyntax},
		{"leading zero", `01`, ErrSyntax},
		{"leading plus", `+1`, ErrSyntax},
		{"bare point", `.5`, ErrSyntax},
		{"no fraction digits", `1.`, ErrSyntax},
		{"no exponent digits", `1e+`, ErrSyntax},
		{"NaN", `NaN`, ErrSyntax},
		{"Infinity", `-Infinity`, ErrSyntax},
		{"truncated literal", `tru`, ErrSyntax},
		{"capital literal", `True`, ErrSyntax},
		{"two values", `{} {}`, ErrSyntax},
		{"byte order mark", "\uFEFF{}", ErrSyntax},
		{"raw control character", "\"a\x01b\"", ErrSyntax},
		{"raw newline in string", "\"a\nb\"", ErrSyntax},
		{"unknown escape", `"\x41"`, ErrSyntax},
		{"short unicode escape", `"\u12"`, ErrSyntax},
		{"unterminated string", `"abc`, ErrSyntax},
		{"comment", `{} // x`, ErrSyntax},

		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate key after unescaping", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"duplicate key nested", `[{"k":{"x":1,"y":2,"x":3}}]`, ErrDuplicateKey},
		{"duplicate key same value", `{"a":1,"a":1}`, ErrDuplicateKey},

		{"lone high surrogate", `"\ud800"`, ErrUnrepresentable},
		{"high surrogate then letter", `"\ud800\u0041"`, ErrUnrepresentable},
		{"lone low surrogate", `"\udc00"`, ErrUnrepresentable},
		{"invalid UTF-8", "\"\xff\"", ErrUnrepresentable},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", ErrUnrepresentable},
		{"invalid UTF-8 in key", "{\"\xc3\":1}", ErrUnrepresentable},
		{"overflow", `1e400`, ErrUnrepresentable},
		{"negative overflow", `[-2e308]`, ErrUnrepresentable},

		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("CanonicalJSON(%q) = %s, %v; want error %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCanonicalJSONDuplicateKeyErrorNamesKey(t *testing.T) {
	_, err := CanonicalJSON([]byte(`{"dup":1, "other":2, "dup":3}`))
	if err == nil || !strings.Contains(err.Error(), `"dup"`) || !strings.Contains(err.Error(), "offset 21") {
		t.Fatalf("error = %v; want it to name key \"dup\" at offset 21", err)
	}
}

func TestCanonicalJSONMaxDepthAccepted(t *testing.T) {
	in := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	got, err := CanonicalJSON([]byte(in))
	if err != nil || string(got) != in {
		t.Fatalf("depth %d: err %v, output equal %v", maxDepth, err, string(got) == in)
	}
}

// TestAppendNumberMatchesECMAScriptRules checks the formatting against an
// independent reading of ECMAScript's rules, over doubles of every
// magnitude: parse the output back (it must be the same double), and check
// the form: exponential exactly when the decimal exponent is below -6 or
// 21 and above.
func TestAppendNumberMatchesECMAScriptRules(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s := string(appendNumber(nil, f))
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != f && !(f == 0 && back == 0) {
			t.Fatalf("%v formats as %q, which reads back as %v, %v", f, s, back, err)
		}
		abs := math.Abs(f)
		wantExp := abs != 0 && (abs < 1e-6 || abs >= 1e21)
		if strings.ContainsRune(s, 'e') != wantExp {
			t.Fatalf("%v formats as %q; exponential form wanted: %v", f, s, wantExp)
		}
		if strings.ContainsAny(s, "E") || strings.Contains(s, "e+0") || strings.Contains(s, "e-0") {
			t.Fatalf("%v formats as %q: exponent not in ECMAScript form", f, s)
		}
		// Go's shortest form has the same significant digits.
		g := strconv.FormatFloat(abs, 'e', -1, 64)
		mant, _, _ := strings.Cut(g, "e")
		digits := strings.TrimRight(strings.ReplaceAll(mant, ".", ""), "0")
		m := strings.TrimLeft(strings.TrimPrefix(s, "-"), "0.")
		m, _, _ = strings.Cut(m, "e")
		m = strings.TrimRight(strings.ReplaceAll(m, ".", ""), "0")
		if f != 0 && m != digits {
			t.Fatalf("%v formats as %q: digits %q, want %q", f, s, m, digits)
		}
	}
}

func TestCompareUTF16MatchesEncoding(t *testing.T) {
	alphabet := []rune{0, 'A', 'a', 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xff01, 0xffff, 0x10000, 0x1f600, 0x10ffff}
	r := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		n := r.IntN(4)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 20000 {
		a, b := word(), word()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16(a, b); got != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
}

// FuzzCanonical checks that canonicalization is idempotent, that what it
// accepts encoding/json accepts, that it refuses nothing syntactically valid
// for a syntax reason, and that the canonical form means the same as the
// input.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,"x"]}`, `1.0`, `-0`, `1e21`, `1e-7`, `0.000001`,
		`"\u2028\u0000\ud83d\ude00"`, `{"é":1,"😀":2,"\uff01":3}`, `[[[]]]`, `{"a":{"a":{}}}`,
		`123456789012345678901234567890`, `{"a":1,"a":2}`, `"\ud800"`, `1e400`, ` [ 1 , 2 ] `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := CanonicalJSON(data)
		valid := json.Valid(data)
		if err != nil {
			if valid && errors.Is(err, ErrSyntax) {
				t.Fatalf("encoding/json accepts %q, CanonicalJSON calls it a syntax error: %v", data, err)
			}
			return
		}
		if !valid {
			t.Fatalf("CanonicalJSON accepts %q, encoding/json does not", data)
		}
		c2, err := CanonicalJSON(c)
		if err != nil {
			t.Fatalf("canonical form %q refused: %v", c, err)
		}
		if !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent: %q → %q → %q", data, c, c2)
		}
		a, b := decodeNumbers(t, data), decodeNumbers(t, c)
		if !sameValue(a, b) {
			t.Fatalf("%q and its canonical form %q decode differently", data, c)
		}
	})
}

func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

// sameValue compares decoded JSON, numbers by their value as doubles.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, errx := strconv.ParseFloat(string(a), 64)
		y, erry := strconv.ParseFloat(string(b), 64)
		return errx == nil && erry == nil && x == y
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
