package mcpclient

import "testing"

// Leading bytes of real files of each format, as far as sniffing needs.
var (
	pngBytes  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	jpegBytes = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	wavBytes  = []byte("RIFF\x24\x00\x00\x00WAVEfmt ")
	random    = []byte("\x13\x37\xc0\xde\x00\x42 not a known format")
)

func TestSniffMIME(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"PNG", string(pngBytes), "image/png"},
		{"JPEG", string(jpegBytes), "image/jpeg"},
		{"GIF87a", "GIF87a\x01\x00\x01\x00", "image/gif"},
		{"GIF89a", "GIF89a\x01\x00\x01\x00", "image/gif"},
		{"WebP", "RIFF\x1a\x00\x00\x00WEBPVP8 ", "image/webp"},
		{"BMP", "BM\x36\x00\x00\x00\x00\x00", "image/bmp"},
		{"ICO", "\x00\x00\x01\x00\x01\x00", "image/x-icon"},
		{"TIFF little-endian", "II*\x00\x08\x00", "image/tiff"},
		{"TIFF big-endian", "MM\x00*\x00\x00", "image/tiff"},
		{"WAV", string(wavBytes), "audio/wav"},
		{"AVI", "RIFF\x00\x10\x00\x00AVI LIST", "video/x-msvideo"},
		{"unknown RIFF", "RIFF\x00\x10\x00\x00XXXXdata", ""},
		{"short RIFF", "RIFF\x00\x00", ""},
		{"FLAC", "fLaC\x00\x00\x00\x22", "audio/flac"},
		{"OGG", "OggS\x00\x02\x00\x00", "audio/ogg"},
		{"AMR", "#!AMR\n", "audio/amr"},
		{"MP3 with ID3", "ID3\x04\x00\x00\x00\x00\x00\x00", "audio/mpeg"},
		{"bare MPEG frame", "\xff\xfb\x90\x64\x00", "audio/mpeg"},
		{"MPEG-2 layer III frame", "\xff\xf3\x44\xc4", "audio/mpeg"},
		{"ADTS AAC is not MPEG audio", "\xff\xf1\x50\x80", ""},
		{"0xFF then a non-sync byte", "\xff\x00\x00", ""},
		{"MP4", "\x00\x00\x00\x18ftypisom\x00\x00\x02\x00", "video/mp4"},
		{"M4A", "\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00", "audio/mp4"},
		{"M4B", "\x00\x00\x00\x20ftypM4B \x00\x00\x00\x00", "audio/mp4"},
		{"AVIF", "\x00\x00\x00\x1cftypavif\x00\x00\x00\x00", "image/avif"},
		{"AVIF sequence", "\x00\x00\x00\x1cftypavis\x00\x00\x00\x00", "image/avif"},
		{"HEIC", "\x00\x00\x00\x18ftypheic\x00\x00\x00\x00", "image/heic"},
		{"SVG", `<svg xmlns="http://www.w3.org/2000/svg"/>`, "image/svg+xml"},
		{"SVG after whitespace", "\n\t  <svg width=\"1\"/>", "image/svg+xml"},
		{"HTML is not SVG", "<html><svg/></html>", ""},
		{"plain text", "hello world", ""},
		{"random bytes", string(random), ""},
		{"single byte", "\xff", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sniffMIME([]byte(tc.data)); got != tc.want {
				t.Errorf("sniffMIME(%q) = %q, want %q", tc.data, got, tc.want)
			}
		})
	}
	if got := sniffMIME(nil); got != "" {
		t.Errorf("sniffMIME(nil) = %q", got)
	}
}

func TestFixMIME(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kind     string
		declared string
		data     []byte
		want     string
	}{
		{"generic declared, bytes decide", "image", "application/octet-stream", pngBytes, "image/png"},
		{"missing declared, bytes decide", "image", "", pngBytes, "image/png"},
		{"wrong image type corrected", "image", "image/jpeg", pngBytes, "image/png"},
		{"wrong kind corrected", "audio", "image/png", wavBytes, "audio/wav"},
		{"right declaration kept", "image", "image/png", pngBytes, "image/png"},
		{"unrecognized bytes, right kind kept", "image", "image/x-custom", random, "image/x-custom"},
		{"unrecognized bytes, kind matched case-insensitively", "audio", "Audio/Basic", random, "Audio/Basic"},
		{"unrecognized bytes, wrong kind", "image", "audio/wav", random, "application/octet-stream"},
		{"unrecognized bytes, generic", "audio", "application/octet-stream", random, "application/octet-stream"},
		{"unrecognized bytes, nothing declared", "image", "", random, "application/octet-stream"},
		{"kind prefix must be a whole type", "image", "imagery/png", random, "application/octet-stream"},
		{"empty data, right kind kept", "audio", "audio/ogg", nil, "audio/ogg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fixMIME(tc.kind, tc.declared, tc.data); got != tc.want {
				t.Errorf("fixMIME(%q, %q, %q…) = %q, want %q", tc.kind, tc.declared, tc.data[:min(6, len(tc.data))], got, tc.want)
			}
		})
	}
}

func TestFixResourceMIME(t *testing.T) {
	for _, tc := range []struct {
		name     string
		declared string
		blob     []byte
		want     string
	}{
		{"specific declaration kept even if bytes differ", "application/pdf", pngBytes, "application/pdf"},
		{"matching declaration kept", "image/png", pngBytes, "image/png"},
		{"missing declaration sniffed", "", pngBytes, "image/png"},
		{"generic declaration sniffed", "application/octet-stream", wavBytes, "audio/wav"},
		{"generic declaration matched case-insensitively", "Application/Octet-Stream", jpegBytes, "image/jpeg"},
		{"missing and unrecognized stays empty", "", random, ""},
		{"generic and unrecognized stays generic", "application/octet-stream", random, "application/octet-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fixResourceMIME(tc.declared, tc.blob); got != tc.want {
				t.Errorf("fixResourceMIME(%q, …) = %q, want %q", tc.declared, got, tc.want)
			}
		})
	}
}
