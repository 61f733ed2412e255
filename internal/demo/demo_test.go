package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/png" // registers the decoder that image.Decode needs
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// eventTimeout bounds how long a test waits for something the server is
// expected to do, so a broken server fails the test instead of hanging it.
const eventTimeout = 10 * time.Second

// connectInMemory connects a new client to srv over in-memory transports and
// closes both ends when the test ends.
func connectInMemory(t *testing.T, srv *mcp.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := t.Context()
	serverTransport, clientTransport := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverTransport, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "0"}, opts)
	cs, err := client.Connect(ctx, clientTransport, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// connectHTTP connects a new client to the Streamable HTTP endpoint at url
// and closes the session when the test ends.
func connectHTTP(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "0"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("client connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// startHTTP serves HTTPHandler(nil) on a real loopback listener.
func startHTTP(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(HTTPHandler(nil))
	t.Cleanup(func() {
		// A server stuck in a handler would block Close forever; report it
		// instead of hanging the whole test binary.
		closed := make(chan struct{})
		go func() {
			ts.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(eventTimeout):
			t.Error("HTTP server did not shut down; a handler is stuck")
		}
	})
	return ts.URL
}

// call calls tool with args and fails the test on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res
}

// onlyText returns the text of res, which must consist of exactly one text
// block.
func onlyText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("got %d content blocks, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content block is %T, want *mcp.TextContent", res.Content[0])
	}
	return tc.Text
}

// successText returns the text of a successful single-text-block result.
func successText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	text := onlyText(t, res)
	if res.IsError {
		t.Fatalf("unexpected tool error: %s", text)
	}
	return text
}

// errorText returns the text of a tool error result.
func errorText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	text := onlyText(t, res)
	if !res.IsError {
		t.Fatalf("got success %q, want a tool error", text)
	}
	return text
}

// structured decodes the structured content of res into dst.
func structured(t *testing.T, res *mcp.CallToolResult, dst any) {
	t.Helper()
	if res.StructuredContent == nil {
		t.Fatal("result has no structured content")
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("re-encoding structured content: %v", err)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		t.Fatalf("decoding structured content %s: %v", data, err)
	}
}

// progressRecorder collects progress notifications in arrival order.
type progressRecorder chan *mcp.ProgressNotificationParams

// options returns client options that feed progress notifications to r.
func (r progressRecorder) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r <- req.Params
		},
	}
}

// next returns the next progress notification, failing the test if none
// arrives within eventTimeout.
func (r progressRecorder) next(t *testing.T) *mcp.ProgressNotificationParams {
	t.Helper()
	select {
	case p := <-r:
		return p
	case <-time.After(eventTimeout):
		t.Fatal("timed out waiting for a progress notification")
		return nil
	}
}

func TestListTools(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	tools := make(map[string]*mcp.Tool)
	var names []string
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
		names = append(names, tool.Name)
	}
	want := []string{
		"echo", "add", "list_notes", "write_note", "delete_note",
		"tiny_image", "mislabeled_image", "tiny_audio", "embedded_resource",
		"slow_count", "wait_for_cancel", "stats", "fail",
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tool names = %v, want %v", names, want)
	}

	for _, tool := range res.Tools {
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		schema, ok := tool.InputSchema.(map[string]any)
		if !ok || schema["type"] != "object" {
			t.Errorf("%s input schema = %v, want an object schema", tool.Name, tool.InputSchema)
		}
		if tool.Annotations == nil {
			t.Errorf("%s has no annotations", tool.Name)
		}
	}
	for _, name := range []string{"echo", "add", "list_notes"} {
		if a := tools[name].Annotations; a == nil || !a.ReadOnlyHint {
			t.Errorf("%s annotations = %+v, want readOnlyHint true", name, a)
		}
	}
	if a := tools["write_note"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("write_note annotations = %+v, want readOnlyHint false and destructiveHint false", a)
	}
	if a := tools["delete_note"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("delete_note annotations = %+v, want destructiveHint true", a)
	}

	var echoSchema struct {
		Required []string `json:"required"`
	}
	data, _ := json.Marshal(tools["echo"].InputSchema)
	if err := json.Unmarshal(data, &echoSchema); err != nil || !slices.Equal(echoSchema.Required, []string{"text"}) {
		t.Errorf("echo schema %s: required = %v (err %v), want [text]", data, echoSchema.Required, err)
	}
	var noteSchema struct {
		Properties struct {
			Title struct {
				MinLength int `json:"minLength"`
				MaxLength int `json:"maxLength"`
			} `json:"title"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	data, _ = json.Marshal(tools["write_note"].InputSchema)
	if err := json.Unmarshal(data, &noteSchema); err != nil {
		t.Fatalf("decoding write_note schema %s: %v", data, err)
	}
	if got := noteSchema.Properties.Title; got.MinLength != 1 || got.MaxLength != 100 {
		t.Errorf("write_note title length bounds = %d..%d, want 1..100", got.MinLength, got.MaxLength)
	}
	if !slices.Equal(noteSchema.Required, []string{"title", "body"}) {
		t.Errorf("write_note required = %v, want [title body]", noteSchema.Required)
	}
}

func TestEcho(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	const text = "hello, wörld\nsecond line"
	if got := successText(t, call(t, cs, "echo", map[string]any{"text": text})); got != text {
		t.Errorf("echo returned %q, want %q", got, text)
	}
}

func TestAdd(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	for _, tc := range []struct {
		a, b     float64
		wantText string
	}{
		{2, 3, "5"},
		{0.5, -2, "-1.5"},
		{1e6, 1e6, "2000000"},
	} {
		res := call(t, cs, "add", map[string]any{"a": tc.a, "b": tc.b})
		if got := successText(t, res); got != tc.wantText {
			t.Errorf("add(%v, %v) text = %q, want %q", tc.a, tc.b, got, tc.wantText)
		}
		var out struct {
			Sum *float64 `json:"sum"`
		}
		structured(t, res, &out)
		if out.Sum == nil || *out.Sum != tc.a+tc.b {
			t.Errorf("add(%v, %v) structured sum = %v, want %v", tc.a, tc.b, out.Sum, tc.a+tc.b)
		}
	}
}

func TestAddOverflowIsToolError(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	got := errorText(t, call(t, cs, "add", map[string]any{"a": 1e308, "b": 1e308}))
	if !strings.Contains(got, "overflows") {
		t.Errorf("error = %q, want it to mention the overflow", got)
	}
}

// listNotes calls list_notes and returns its text and structured titles.
func listNotes(t *testing.T, cs *mcp.ClientSession) (string, []string) {
	t.Helper()
	res := call(t, cs, "list_notes", nil)
	text := successText(t, res)
	var out struct {
		Titles []string `json:"titles"`
	}
	structured(t, res, &out)
	return text, out.Titles
}

func TestNotesRoundTrip(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)

	if text, titles := listNotes(t, cs); text != "no notes" || len(titles) != 0 {
		t.Fatalf("empty store lists %q, %v; want \"no notes\", []", text, titles)
	}
	for _, title := range []string{"shopping", "ideas"} {
		got := successText(t, call(t, cs, "write_note", map[string]any{"title": title, "body": "body of " + title}))
		if want := fmt.Sprintf("saved note %q", title); got != want {
			t.Errorf("write_note returned %q, want %q", got, want)
		}
	}
	if text, titles := listNotes(t, cs); text != "ideas\nshopping" || !slices.Equal(titles, []string{"ideas", "shopping"}) {
		t.Fatalf("after writes, list_notes = %q, %v; want \"ideas\\nshopping\", [ideas shopping]", text, titles)
	}

	successText(t, call(t, cs, "delete_note", map[string]any{"title": "shopping"}))
	if text, titles := listNotes(t, cs); text != "ideas" || !slices.Equal(titles, []string{"ideas"}) {
		t.Fatalf("after delete, list_notes = %q, %v; want \"ideas\", [ideas]", text, titles)
	}

	got := errorText(t, call(t, cs, "delete_note", map[string]any{"title": "shopping"}))
	if want := `no note titled "shopping"`; got != want {
		t.Errorf("deleting a missing note returned %q, want %q", got, want)
	}
}

func TestInvalidArgumentsAreToolErrors(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	for _, tc := range []struct {
		tool     string
		args     any
		wantText string // a fragment naming the offending input
	}{
		{"echo", nil, `"text"`},
		{"echo", map[string]any{"text": 7}, "invalid arguments"},
		{"add", map[string]any{"a": 1}, `"b"`},
		{"add", map[string]any{"a": "1", "b": 2}, "invalid arguments"},
		{"write_note", map[string]any{"title": "t"}, `"body"`},
		{"write_note", map[string]any{"title": "", "body": "x"}, `"title"`},
		{"write_note", map[string]any{"title": strings.Repeat("é", 101), "body": "x"}, `"title"`},
		{"write_note", map[string]any{"title": "two\nlines", "body": "x"}, `"title"`},
		{"delete_note", map[string]any{}, `"title"`},
		{"slow_count", map[string]any{"steps": 0}, `"steps"`},
		{"slow_count", map[string]any{"steps": 1.5}, `"steps"`},
		{"slow_count", map[string]any{"interval_ms": 10001}, `"interval_ms"`},
		{"stats", map[string]any{"wait_for_cancelled": -1}, `"wait_for_cancelled"`},
		{"list_notes", []int{1}, "invalid arguments"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			got := errorText(t, call(t, cs, tc.tool, tc.args))
			if !strings.Contains(got, tc.wantText) {
				t.Errorf("%s(%v) error = %q, want it to contain %q", tc.tool, tc.args, got, tc.wantText)
			}
		})
	}
	// A title of exactly 100 multi-byte characters is within the limit.
	successText(t, call(t, cs, "write_note", map[string]any{"title": strings.Repeat("é", 100), "body": ""}))
}

func TestFail(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	if got, want := errorText(t, call(t, cs, "fail", nil)), "demo failure: requested"; got != want {
		t.Errorf("fail without reason = %q, want %q", got, want)
	}
	if got, want := errorText(t, call(t, cs, "fail", map[string]any{"reason": "disk on fire"})), "demo failure: disk on fire"; got != want {
		t.Errorf("fail with reason = %q, want %q", got, want)
	}
}

// imageBlock returns the single image block of res.
func imageBlock(t *testing.T, res *mcp.CallToolResult) *mcp.ImageContent {
	t.Helper()
	var found *mcp.ImageContent
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok {
			if found != nil {
				t.Fatal("result has more than one image block")
			}
			found = img
		}
	}
	if found == nil {
		t.Fatalf("result has no image block: %+v", res.Content)
	}
	return found
}

func TestTinyImage(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	res := call(t, cs, "tiny_image", nil)
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("tiny_image returned isError=%v with %d blocks, want success with an image and a text block", res.IsError, len(res.Content))
	}
	if _, ok := res.Content[1].(*mcp.TextContent); !ok {
		t.Errorf("second block is %T, want a text description", res.Content[1])
	}
	img := imageBlock(t, res)
	if img.MIMEType != "image/png" {
		t.Errorf("MIME type = %q, want image/png", img.MIMEType)
	}
	decoded, format, err := image.Decode(bytes.NewReader(img.Data))
	if err != nil {
		t.Fatalf("decoding image: %v", err)
	}
	if format != "png" || decoded.Bounds() != image.Rect(0, 0, 8, 8) {
		t.Fatalf("decoded a %s of %v, want an 8x8 png", format, decoded.Bounds())
	}
	// The gradient runs from red on the left to blue on the right.
	if r, _, b, _ := decoded.At(0, 0).RGBA(); r>>8 != 255 || b>>8 != 0 {
		t.Errorf("top-left pixel has red %d, blue %d; want pure red", r>>8, b>>8)
	}
	if r, _, b, _ := decoded.At(7, 0).RGBA(); r>>8 != 0 || b>>8 != 255 {
		t.Errorf("top-right pixel has red %d, blue %d; want pure blue", r>>8, b>>8)
	}
}

func TestMislabeledImage(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	want := imageBlock(t, call(t, cs, "tiny_image", nil))
	got := imageBlock(t, call(t, cs, "mislabeled_image", nil))
	if got.MIMEType != "application/octet-stream" {
		t.Errorf("MIME type = %q, want application/octet-stream", got.MIMEType)
	}
	if !bytes.Equal(got.Data, want.Data) {
		t.Error("mislabeled_image bytes differ from tiny_image bytes")
	}
	if sniffed := http.DetectContentType(got.Data); sniffed != "image/png" {
		t.Errorf("sniffed type = %q, want image/png", sniffed)
	}
}

func TestTinyAudio(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	res := call(t, cs, "tiny_audio", nil)
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("tiny_audio returned isError=%v with %d blocks, want one audio block", res.IsError, len(res.Content))
	}
	audio, ok := res.Content[0].(*mcp.AudioContent)
	if !ok {
		t.Fatalf("block is %T, want *mcp.AudioContent", res.Content[0])
	}
	if audio.MIMEType != "audio/wav" {
		t.Errorf("MIME type = %q, want audio/wav", audio.MIMEType)
	}
	data := audio.Data
	if len(data) < 44 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WAVE" {
		t.Fatalf("audio does not start with a RIFF/WAVE header: % x", data[:min(len(data), 12)])
	}
	if riffSize := binary.LittleEndian.Uint32(data[4:8]); int(riffSize) != len(data)-8 {
		t.Errorf("RIFF size field = %d, want %d", riffSize, len(data)-8)
	}
	if string(data[36:40]) != "data" {
		t.Fatalf("no data chunk at offset 36: %q", data[36:40])
	}
	if samples := binary.LittleEndian.Uint32(data[40:44]) / 2; samples < 100 || int(samples)*2 != len(data)-44 {
		t.Errorf("data chunk holds %d samples in %d bytes, want at least 100 samples filling the file", samples, len(data)-44)
	}
}

func TestEmbeddedResource(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	res := call(t, cs, "embedded_resource", nil)
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("embedded_resource returned isError=%v with %d blocks, want a resource and a link", res.IsError, len(res.Content))
	}
	embedded, ok := res.Content[0].(*mcp.EmbeddedResource)
	if !ok || embedded.Resource == nil {
		t.Fatalf("first block is %#v, want an embedded resource", res.Content[0])
	}
	if r := embedded.Resource; r.URI != "demo://notes/readme" || r.MIMEType != "text/plain" || r.Text == "" {
		t.Errorf("embedded resource = %+v, want demo://notes/readme, text/plain, with text", r)
	}
	link, ok := res.Content[1].(*mcp.ResourceLink)
	if !ok {
		t.Fatalf("second block is %T, want *mcp.ResourceLink", res.Content[1])
	}
	if link.URI != "demo://notes/index" || link.Name == "" {
		t.Errorf("resource link = %+v, want a named link to demo://notes/index", link)
	}
}

func TestSlowCountReportsProgress(t *testing.T) {
	progress := make(progressRecorder, 16)
	cs := connectInMemory(t, NewServer(nil), progress.options())

	const steps = 4
	params := &mcp.CallToolParams{Name: "slow_count", Arguments: map[string]any{"steps": steps, "interval_ms": 1}}
	params.SetProgressToken("count-token")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatalf("calling slow_count: %v", err)
	}
	if got, want := successText(t, res), fmt.Sprintf("counted to %d", steps); got != want {
		t.Errorf("slow_count returned %q, want %q", got, want)
	}
	// Notifications may still be in flight when the result arrives, so each
	// is awaited rather than counted at this instant.
	for step := 1; step <= steps; step++ {
		p := progress.next(t)
		if p.ProgressToken != "count-token" || p.Progress != float64(step) || p.Total != steps {
			t.Errorf("notification %d = token %v, %v/%v; want count-token, %d/%d", step, p.ProgressToken, p.Progress, p.Total, step, steps)
		}
		if want := fmt.Sprintf("step %d of %d", step, steps); p.Message != want {
			t.Errorf("notification %d message = %q, want %q", step, p.Message, want)
		}
	}
}

func TestSlowCountWithoutTokenSendsNoProgress(t *testing.T) {
	progress := make(progressRecorder, 16)
	cs := connectInMemory(t, NewServer(nil), progress.options())

	successText(t, call(t, cs, "slow_count", map[string]any{"steps": 3, "interval_ms": 1}))
	// The session delivers messages in order, so had the untokened call sent
	// progress, it would arrive before the marker call's notification.
	params := &mcp.CallToolParams{Name: "slow_count", Arguments: map[string]any{"steps": 1, "interval_ms": 1}}
	params.SetProgressToken("marker")
	if _, err := cs.CallTool(t.Context(), params); err != nil {
		t.Fatalf("calling slow_count: %v", err)
	}
	if p := progress.next(t); p.ProgressToken != "marker" {
		t.Errorf("first notification has token %v, want the marker call's token", p.ProgressToken)
	}
}

// statsResult is the structured content of the stats tool.
type statsResult struct {
	Calls     int `json:"calls"`
	Cancelled int `json:"cancelled"`
}

// callStats calls stats with its own bounded context, so that a server that
// never observes the expected cancellation fails the test instead of hanging
// it.
func callStats(t *testing.T, cs *mcp.ClientSession, waitForCancelled int) statsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stats", Arguments: map[string]any{"wait_for_cancelled": waitForCancelled}})
	if err != nil {
		t.Fatalf("calling stats: %v", err)
	}
	text := successText(t, res)
	var fromText, fromStructured statsResult
	if err := json.Unmarshal([]byte(text), &fromText); err != nil {
		t.Fatalf("stats text %q is not JSON: %v", text, err)
	}
	structured(t, res, &fromStructured)
	if fromText != fromStructured {
		t.Errorf("stats text %+v disagrees with structured content %+v", fromText, fromStructured)
	}
	return fromStructured
}

func TestStatsCountsCalls(t *testing.T) {
	cs := connectInMemory(t, NewServer(nil), nil)
	call(t, cs, "echo", map[string]any{"text": "a"})
	call(t, cs, "fail", nil)
	call(t, cs, "echo", nil) // invalid arguments still count as a call
	// The stats call itself is the fourth call.
	if got, want := callStats(t, cs, 0), (statsResult{Calls: 4, Cancelled: 0}); got != want {
		t.Errorf("stats = %+v, want %+v", got, want)
	}
}

// cancelAfterFirstProgress calls tool with args and a progress token, waits
// until the handler reports progress (proving the call reached it), cancels
// the call, and checks that the client sees the cancellation.
func cancelAfterFirstProgress(t *testing.T, cs *mcp.ClientSession, progress progressRecorder, tool string, args any) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	params.SetProgressToken(tool + "-token")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		errc <- err
	}()

	if p := progress.next(t); p.ProgressToken != tool+"-token" {
		t.Fatalf("progress token = %v, want %s-token", p.ProgressToken, tool)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled %s returned %v, want context.Canceled", tool, err)
		}
	case <-time.After(eventTimeout):
		t.Fatalf("%s did not return after cancellation", tool)
	}
}

func TestWaitForCancelInMemory(t *testing.T) {
	progress := make(progressRecorder, 16)
	cs := connectInMemory(t, NewServer(nil), progress.options())
	cancelAfterFirstProgress(t, cs, progress, "wait_for_cancel", nil)
	if got := callStats(t, cs, 1); got.Cancelled != 1 {
		t.Errorf("stats after one cancellation = %+v, want cancelled 1", got)
	}
}

func TestWaitForCancelOverHTTP(t *testing.T) {
	progress := make(progressRecorder, 16)
	cs := connectHTTP(t, startHTTP(t), progress.options())
	cancelAfterFirstProgress(t, cs, progress, "wait_for_cancel", nil)
	if got := callStats(t, cs, 1); got.Cancelled < 1 {
		t.Errorf("stats after one cancellation = %+v, want cancelled >= 1", got)
	}
}

func TestCancelThenCloseOverHTTP(t *testing.T) {
	url := startHTTP(t)
	progress := make(progressRecorder, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "0"}, progress.options())
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("client connect to %s: %v", url, err)
	}
	cancelAfterFirstProgress(t, cs, progress, "wait_for_cancel", nil)
	// Closing at once usually overtakes the client's asynchronous
	// notifications/cancelled, leaving the session deletion to end the call.
	closed := make(chan error, 1)
	go func() { closed <- cs.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("closing session: %v", err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("closing the session did not finish")
	}
	// The deletion must have ended the parked call, or this waits in vain.
	observer := connectHTTP(t, url, nil)
	if got := callStats(t, observer, 1); got.Cancelled != 1 {
		t.Errorf("stats after cancel-and-close = %+v, want cancelled 1", got)
	}
}

func TestSlowCountCancellation(t *testing.T) {
	progress := make(progressRecorder, 128)
	cs := connectInMemory(t, NewServer(nil), progress.options())
	// With 100 steps of 50 ms the call still has seconds to run after its
	// first progress notification, so the cancellation lands mid-count.
	cancelAfterFirstProgress(t, cs, progress, "slow_count", map[string]any{"steps": 100, "interval_ms": 50})
	if got := callStats(t, cs, 1); got.Cancelled != 1 {
		t.Errorf("stats after cancelling slow_count = %+v, want cancelled 1", got)
	}
}

func TestHTTPSharesStateAcrossSessions(t *testing.T) {
	url := startHTTP(t)
	writer := connectHTTP(t, url, nil)
	reader := connectHTTP(t, url, nil)

	if got := successText(t, call(t, writer, "echo", map[string]any{"text": "over http"})); got != "over http" {
		t.Errorf("echo over HTTP returned %q", got)
	}
	successText(t, call(t, writer, "write_note", map[string]any{"title": "shared", "body": "visible to all sessions"}))
	if text, titles := listNotes(t, reader); text != "shared" || !slices.Equal(titles, []string{"shared"}) {
		t.Errorf("second session lists %q, %v; want the note written by the first", text, titles)
	}
}

func TestServersAreIndependent(t *testing.T) {
	first := connectInMemory(t, NewServer(nil), nil)
	second := connectInMemory(t, NewServer(nil), nil)
	successText(t, call(t, first, "write_note", map[string]any{"title": "private", "body": "x"}))
	if text, _ := listNotes(t, second); text != "no notes" {
		t.Errorf("second server lists %q, want no notes", text)
	}
	if got := callStats(t, second, 0); got.Calls != 2 {
		t.Errorf("second server stats = %+v, want only its own 2 calls", got)
	}
}

func TestWaitCancelledWakesOnCancellation(t *testing.T) {
	st := newState()
	done := make(chan error, 1)
	go func() { done <- st.waitCancelled(t.Context(), 2) }()
	st.countCancelled()
	st.countCancelled()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("waitCancelled returned %v, want nil", err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("waitCancelled did not wake after the count was reached")
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := st.waitCancelled(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("waitCancelled with a cancelled context returned %v, want context.Canceled", err)
	}
}

func TestStopAllCancelsRunningAndLaterCalls(t *testing.T) {
	st := newState()
	running, release := st.track(t.Context(), "")
	defer release()
	st.stopAll()
	if !errors.Is(context.Cause(running), errServerStopped) {
		t.Errorf("running call cause = %v, want %v", context.Cause(running), errServerStopped)
	}
	later, releaseLater := st.track(t.Context(), "")
	defer releaseLater()
	if later.Err() == nil {
		t.Error("a call started after stopAll was not cancelled")
	}
}

func TestEndSessionCancelsOnlyThatSession(t *testing.T) {
	st := newState()
	doomed, release := st.track(t.Context(), "a")
	defer release()
	survivor, releaseSurvivor := st.track(t.Context(), "b")
	defer releaseSurvivor()
	st.endSession("a")
	if !errors.Is(context.Cause(doomed), errSessionDeleted) {
		t.Errorf("call in deleted session: cause = %v, want %v", context.Cause(doomed), errSessionDeleted)
	}
	if survivor.Err() != nil {
		t.Errorf("call in another session was cancelled: %v", context.Cause(survivor))
	}
}
