package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sizes of the generated media, kept small so results stay cheap to send.
const (
	imageSide       = 8
	audioSampleRate = 8000
	audioSamples    = 400 // 50 ms at audioSampleRate
	audioToneHz     = 440
)

// tinyPNG returns the encoded bytes of an 8x8 PNG with a red-to-blue
// gradient. It is computed once because every image tool returns the same
// picture.
var tinyPNG = sync.OnceValues(func() ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, imageSide, imageSide))
	for y := range imageSide {
		for x := range imageSide {
			// A gradient rather than a flat fill makes a decoded image whose
			// pixels were scrambled detectably different from the original.
			img.Set(x, y, color.NRGBA{
				R: uint8(255 * (imageSide - 1 - x) / (imageSide - 1)),
				G: uint8(255 * y / (imageSide - 1)),
				B: uint8(255 * x / (imageSide - 1)),
				A: 255,
			})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
})

// tinyWAV returns a mono 16-bit PCM WAV file holding a short, quiet 440 Hz
// tone.
var tinyWAV = sync.OnceValue(func() []byte {
	const (
		channels      = 1
		bitsPerSample = 16
		blockAlign    = channels * bitsPerSample / 8
		dataSize      = audioSamples * blockAlign
	)
	var buf bytes.Buffer
	buf.Grow(44 + dataSize)
	// Writes to a bytes.Buffer cannot fail, so binary.Write errors are moot.
	le := func(v any) { _ = binary.Write(&buf, binary.LittleEndian, v) }

	buf.WriteString("RIFF")
	le(uint32(36 + dataSize)) // size of everything after this field
	buf.WriteString("WAVE")

	buf.WriteString("fmt ")
	le(uint32(16)) // PCM format chunk size
	le(uint16(1))  // PCM
	le(uint16(channels))
	le(uint32(audioSampleRate))
	le(uint32(audioSampleRate * blockAlign)) // byte rate
	le(uint16(blockAlign))
	le(uint16(bitsPerSample))

	buf.WriteString("data")
	le(uint32(dataSize))
	for i := range audioSamples {
		// A low amplitude keeps the tone from being startling if a client
		// actually plays it.
		v := 0.1 * math.Sin(2*math.Pi*audioToneHz*float64(i)/audioSampleRate)
		le(int16(v * math.MaxInt16))
	}
	return buf.Bytes()
})

// Resource URIs returned by the embedded_resource tool.
const (
	readmeURI = "demo://notes/readme"
	indexURI  = "demo://notes/index"
)

// pngContent returns the demo PNG as an image block labelled mimeType.
func pngContent(mimeType string) (*mcp.ImageContent, error) {
	data, err := tinyPNG()
	if err != nil {
		return nil, fmt.Errorf("encoding demo png: %w", err)
	}
	// Each result gets its own copy so nothing downstream can alter the
	// shared bytes.
	return &mcp.ImageContent{Data: bytes.Clone(data), MIMEType: mimeType}, nil
}

// tinyImage implements the tiny_image tool.
func (ts *toolset) tinyImage(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := noArgs(req); err != nil {
		return errorResult(err), nil
	}
	img, err := pngContent("image/png")
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		img,
		&mcp.TextContent{Text: fmt.Sprintf("an %dx%d PNG with a red-to-blue gradient", imageSide, imageSide)},
	}}, nil
}

// mislabeledImage implements the mislabeled_image tool.
func (ts *toolset) mislabeledImage(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := noArgs(req); err != nil {
		return errorResult(err), nil
	}
	// The generic type is deliberate: clients are expected to sniff the bytes
	// and recover image/png.
	img, err := pngContent("application/octet-stream")
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{img}}, nil
}

// tinyAudio implements the tiny_audio tool.
func (ts *toolset) tinyAudio(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := noArgs(req); err != nil {
		return errorResult(err), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.AudioContent{Data: bytes.Clone(tinyWAV()), MIMEType: "audio/wav"},
	}}, nil
}

// embeddedResource implements the embedded_resource tool.
func (ts *toolset) embeddedResource(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := noArgs(req); err != nil {
		return errorResult(err), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI:      readmeURI,
			MIMEType: "text/plain",
			Text:     "The toolwire demo server keeps notes in memory. Use write_note, list_notes and delete_note to manage them.",
		}},
		&mcp.ResourceLink{
			URI:         indexURI,
			Name:        "notes-index",
			Title:       "Notes index",
			Description: "Index of the demo server's notes.",
			MIMEType:    "text/plain",
		},
	}}, nil
}
