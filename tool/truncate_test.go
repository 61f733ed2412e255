package tool

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncatedCutsTextAtARuneBoundary(t *testing.T) {
	// "é" is two bytes: a limit of 5 falls inside the third one.
	r := &Result{Content: []Content{&Text{Text: "ééééé"}}}
	got := r.Truncated(5)
	if len(got.Content) != 2 {
		t.Fatalf("content = %+v, want the cut text and a marker", got.Content)
	}
	kept := got.Content[0].(*Text).Text
	if kept != "éé" || !utf8.ValidString(kept) {
		t.Errorf("kept %q, want %q", kept, "éé")
	}
	marker := got.Content[1].(*Text).Text
	if !strings.Contains(marker, "6 of 10 bytes left out (limit 5)") {
		t.Errorf("marker %q does not say how much was cut", marker)
	}
	if r.Content[0].(*Text).Text != "ééééé" || len(r.Content) != 1 {
		t.Errorf("the original result changed: %+v", r.Content)
	}
}

func TestTruncatedLeavesSmallAndErrorResults(t *testing.T) {
	small := &Result{Content: []Content{&Text{Text: "hello"}}}
	if got := small.Truncated(5); got != small {
		t.Errorf("a result of exactly the limit was changed: %+v", got.Content)
	}
	if got := small.Truncated(0); got != small {
		t.Error("limit 0 must mean no limit")
	}
	refused := &Result{IsError: true, Reason: ReasonDeclined, Message: strings.Repeat("x", 100)}
	if got := refused.Truncated(10); got != refused {
		t.Error("toolwire's own error result was truncated")
	}
	// A tool's own error carries the server's content: capped like any.
	failed := &Result{IsError: true, Reason: ReasonTool, Content: []Content{&Text{Text: strings.Repeat("x", 100)}}}
	if got := failed.Truncated(10); got == failed || !got.IsError || got.Content[0].(*Text).Text != strings.Repeat("x", 10) {
		t.Errorf("a tool's error result of 100 bytes passed the 10-byte cap: %+v", got.Content)
	}
}

func TestTruncatedReplacesBinaryAndStructuredThatDoNotFit(t *testing.T) {
	r := &Result{
		Content:    []Content{&Text{Text: "abc"}, &Image{Data: make([]byte, 50), MIMEType: "image/png"}, &Image{Data: make([]byte, 4), MIMEType: "image/gif"}},
		Structured: map[string]any{"big": strings.Repeat("y", 40)},
	}
	got := r.Truncated(10)
	var kinds []string
	for _, c := range got.Content {
		switch c := c.(type) {
		case *Text:
			kinds = append(kinds, "text:"+c.Text)
		case *Image:
			kinds = append(kinds, "image:"+c.MIMEType)
		}
	}
	joined := strings.Join(kinds, "|")
	if !strings.HasPrefix(joined, "text:abc|text:[toolwire: image image/png of 50 bytes left out") || !strings.Contains(joined, "|image:image/gif|") {
		t.Errorf("content = %s; want the text, a marker for the 50-byte png, the 4-byte gif kept, then the summary", joined)
	}
	if got.Structured != nil {
		t.Error("a structured value larger than what was left was kept")
	}
	if r.Structured == nil || len(r.Content) != 3 {
		t.Error("the original result changed")
	}
}

func FuzzCutUTF8(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("日本語", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n > 1<<20 || n < -1 {
			return
		}
		got := cutUTF8(s, n)
		if !strings.HasPrefix(s, got) || len(got) > max(n, 0) {
			t.Fatalf("cutUTF8(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("cutUTF8(%q, %d) = %q splits a rune", s, n, got)
		}
		// Maximal: one more rune would not fit.
		if len(got) < len(s) && utf8.ValidString(s) {
			_, size := utf8.DecodeRuneInString(s[len(got):])
			if len(got)+size <= n {
				t.Fatalf("cutUTF8(%q, %d) = %q is not the longest fitting prefix", s, n, got)
			}
		}
	})
}
