package mcpclient

import (
	"encoding/json"
	"testing"
)

func TestUntypeTitledItems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"typed titled items lose their type",
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","anyOf":[{"const":"a","title":"A"}]}}}}`,
			`{"type":"object","properties":{"m":{"type":"array","items":{"anyOf":[{"const":"a","title":"A"}]}}}}`},
		{"untyped titled items stay",
			`{"type":"object","properties":{"m":{"type":"array","items":{"anyOf":[{"const":"a","title":"A"}]}}}}`,
			`{"type":"object","properties":{"m":{"type":"array","items":{"anyOf":[{"const":"a","title":"A"}]}}}}`},
		{"an enum keeps its type",
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","enum":["a"],"anyOf":[{"const":"a","title":"A"}]}}}}`,
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","enum":["a"],"anyOf":[{"const":"a","title":"A"}]}}}}`},
		{"items of another type stay",
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"number","anyOf":[{"const":1,"title":"A"}]}}}}`,
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"number","anyOf":[{"const":1,"title":"A"}]}}}}`},
		{"an empty anyOf stays", // go-sdk refuses it
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","anyOf":[]}}}}`,
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","anyOf":[]}}}}`},
		{"a string property stays",
			`{"type":"object","properties":{"s":{"type":"string","anyOf":[{"const":"a","title":"A"}]}}}`,
			`{"type":"object","properties":{"s":{"type":"string","anyOf":[{"const":"a","title":"A"}]}}}`},
		{"no properties", `{"type":"object"}`, `{"type":"object"}`},
		{"not an object", `"string"`, `"string"`},
	} {
		var in any
		if err := json.Unmarshal([]byte(c.in), &in); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(untypeTitledItems(in))
		var want any
		_ = json.Unmarshal([]byte(c.want), &want)
		wantJSON, _ := json.Marshal(want)
		if string(got) != string(wantJSON) {
			t.Errorf("%s: %s, want %s", c.name, got, wantJSON)
		}
		if again, _ := json.Marshal(in); string(again) != string(mustCompact(t, c.in)) {
			t.Errorf("%s: the input changed to %s", c.name, again)
		}
	}
}

func mustCompact(t *testing.T, s string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return b
}
