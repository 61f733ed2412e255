package tool_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

func TestResultFlatten(t *testing.T) {
	img := &tool.Image{Data: []byte{1}, MIMEType: "image/png"}
	tests := []struct {
		name string
		res  *tool.Result
		want any
	}{
		{"structured wins over text",
			&tool.Result{Structured: map[string]any{"n": 1}, Content: []tool.Content{&tool.Text{Text: "t"}}},
			map[string]any{"n": 1}},
		{"structured zero value still wins",
			&tool.Result{Structured: 0, Content: []tool.Content{&tool.Text{Text: "t"}}},
			0},
		{"single text is a string",
			tool.TextResult("hello"),
			"hello"},
		{"several texts are joined by newlines",
			&tool.Result{Content: []tool.Content{&tool.Text{Text: "a"}, &tool.Text{Text: "b"}, &tool.Text{Text: ""}}},
			"a\nb\n"},
		{"mixed content is the blocks",
			&tool.Result{Content: []tool.Content{&tool.Text{Text: "a"}, img}},
			[]tool.Content{&tool.Text{Text: "a"}, img}},
		{"only non-text content is the blocks",
			&tool.Result{Content: []tool.Content{img}},
			[]tool.Content{img}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.res.Flatten(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Flatten() = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestResultFlattenOfEmptyResultIsEmptyContent(t *testing.T) {
	for _, res := range []*tool.Result{{}, {Content: []tool.Content{}}} {
		got, ok := res.Flatten().([]tool.Content)
		if !ok {
			t.Fatalf("Flatten() = %#v (%T), want []tool.Content", res.Flatten(), res.Flatten())
		}
		if len(got) != 0 {
			t.Errorf("Flatten() = %v, want no blocks", got)
		}
	}
}

func TestResultText(t *testing.T) {
	res := &tool.Result{Content: []tool.Content{&tool.Text{Text: "a"}, &tool.Audio{}, &tool.Text{Text: "b"}}}
	if got := res.Text(); got != "a\nb" {
		t.Errorf("Text() = %q, want %q", got, "a\nb")
	}
	if got := (&tool.Result{}).Text(); got != "" {
		t.Errorf("Text() of empty result = %q", got)
	}
}

// jsonEqual checks that got and want encode the same JSON value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON = %s\nwant   %s", got, want)
	}
}

func TestContentMarshalJSONShapes(t *testing.T) {
	size := int64(2048)
	tests := []struct {
		name string
		c    tool.Content
		kind string
		want string
	}{
		{"text", &tool.Text{Text: "hi \"there\""}, "text", `{"type":"text","text":"hi \"there\""}`},
		{"empty text keeps the field", &tool.Text{}, "text", `{"type":"text","text":""}`},
		{"image", &tool.Image{Data: []byte{0, 1, 2, 0xff}, MIMEType: "image/png"}, "image",
			`{"type":"image","mimeType":"image/png","data":"AAEC/w=="}`},
		{"audio", &tool.Audio{Data: []byte("RIFF"), MIMEType: "audio/wav"}, "audio",
			`{"type":"audio","mimeType":"audio/wav","data":"UklGRg=="}`},
		{"text resource", &tool.Resource{URI: "file:///a.txt", MIMEType: "text/plain", Text: "body"}, "resource",
			`{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"body"}}`},
		{"blob resource", &tool.Resource{URI: "mem://b", Blob: []byte{0xde, 0xad}}, "resource",
			`{"type":"resource","resource":{"uri":"mem://b","blob":"3q0="}}`},
		{"full resource link", &tool.ResourceLink{URI: "https://x/y", Name: "y", Title: "Why", Description: "d", MIMEType: "text/html", Size: &size}, "resource_link",
			`{"type":"resource_link","uri":"https://x/y","name":"y","title":"Why","description":"d","mimeType":"text/html","size":2048}`},
		{"bare resource link", &tool.ResourceLink{URI: "https://x/y"}, "resource_link",
			`{"type":"resource_link","uri":"https://x/y"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Kind(); got != tt.kind {
				t.Errorf("Kind() = %q, want %q", got, tt.kind)
			}
			b, err := json.Marshal(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, b, tt.want)
		})
	}
}

func TestResultMarshalJSONShape(t *testing.T) {
	tests := []struct {
		name string
		res  *tool.Result
		want string
	}{
		{"nil content is an empty array", &tool.Result{}, `{"content":[]}`},
		{"text result", tool.TextResult("ok"), `{"content":[{"type":"text","text":"ok"}]}`},
		{"structured", &tool.Result{Structured: map[string]int{"n": 1}}, `{"content":[],"structuredContent":{"n":1}}`},
		{"error result", tool.ErrorResult(tool.ReasonDeclined, "no"),
			`{"content":[{"type":"text","text":"no"}],"isError":true,"reason":"declined","message":"no"}`},
		{"violations", &tool.Result{IsError: true, Reason: tool.ReasonInvalidArgs, Message: "m",
			Violations: []tool.Violation{{Path: "/a", Message: "bad"}}},
			`{"content":[],"isError":true,"reason":"invalid_arguments","message":"m","violations":[{"path":"/a","message":"bad"}]}`},
		{"mixed blocks keep their order", &tool.Result{Content: []tool.Content{
			&tool.Image{Data: []byte{1}, MIMEType: "image/gif"}, &tool.Text{Text: "t"}}},
			`{"content":[{"type":"image","mimeType":"image/gif","data":"AQ=="},{"type":"text","text":"t"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.res)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, b, tt.want)
		})
	}
}

func TestErrorResultAndTextResult(t *testing.T) {
	er := tool.ErrorResult(tool.ReasonFailed, "it broke")
	want := &tool.Result{Content: []tool.Content{&tool.Text{Text: "it broke"}}, IsError: true, Reason: tool.ReasonFailed, Message: "it broke"}
	if !reflect.DeepEqual(er, want) {
		t.Errorf("ErrorResult = %+v, want %+v", er, want)
	}
	tr := tool.TextResult("fine")
	want = &tool.Result{Content: []tool.Content{&tool.Text{Text: "fine"}}}
	if !reflect.DeepEqual(tr, want) {
		t.Errorf("TextResult = %+v, want %+v", tr, want)
	}
}
