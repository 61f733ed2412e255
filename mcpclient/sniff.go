package mcpclient

import (
	"bytes"
	"strings"
)

// signature is a magic-number rule: bytes at an offset that identify a
// format.
type signature struct {
	offset int
	magic  string
	mime   string
}

// signatures lists the image and audio formats a tool result is likely to
// carry. Longer, more specific rules come first where prefixes overlap.
var signatures = []signature{
	{0, "\x89PNG\r\n\x1a\n", "image/png"},
	{0, "\xff\xd8\xff", "image/jpeg"},
	{0, "GIF87a", "image/gif"},
	{0, "GIF89a", "image/gif"},
	{0, "BM", "image/bmp"},
	{0, "\x00\x00\x01\x00", "image/x-icon"},
	{0, "II*\x00", "image/tiff"},
	{0, "MM\x00*", "image/tiff"},
	{0, "fLaC", "audio/flac"},
	{0, "OggS", "audio/ogg"},
	{0, "ID3", "audio/mpeg"},
	{0, "#!AMR", "audio/amr"},
}

// riffKinds are the RIFF container formats, told apart by bytes 8–11.
var riffKinds = map[string]string{
	"WEBP": "image/webp",
	"WAVE": "audio/wav",
	"AVI ": "video/x-msvideo",
}

// sniffMIME identifies image and audio bytes by their leading bytes. It
// returns "" when it does not recognize them; it never guesses from a
// declared type.
func sniffMIME(b []byte) string {
	if len(b) >= 12 && string(b[:4]) == "RIFF" {
		return riffKinds[string(b[8:12])]
	}
	if len(b) >= 12 && string(b[4:8]) == "ftyp" {
		return ftypMIME(string(b[8:12]))
	}
	for _, s := range signatures {
		if len(b) >= s.offset+len(s.magic) && string(b[s.offset:s.offset+len(s.magic)]) == s.magic {
			return s.mime
		}
	}
	// An MPEG audio frame starts with 11 set bits; layer bits 00 are
	// reserved, which rules out most other data that starts with 0xFF.
	if len(b) >= 2 && b[0] == 0xFF && b[1]&0xE0 == 0xE0 && b[1]&0x06 != 0 {
		return "audio/mpeg"
	}
	if bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("<svg")) {
		return "image/svg+xml"
	}
	return ""
}

// ftypMIME names an ISO base media file (MP4 family) by its major brand.
func ftypMIME(brand string) string {
	switch {
	case brand == "avif" || brand == "avis":
		return "image/avif"
	case brand == "heic" || brand == "heix" || brand == "mif1":
		return "image/heic"
	case brand == "M4A " || brand == "M4B ":
		return "audio/mp4"
	default:
		return "video/mp4"
	}
}

// fixMIME returns the MIME type to record for media bytes of the given kind
// ("image" or "audio"). The bytes are trusted over the declaration: a server
// may omit the type or get it wrong. When the bytes are not recognized, a
// declared type of the right kind is kept; anything else becomes
// application/octet-stream rather than a type that is known to be wrong.
func fixMIME(kind, declared string, data []byte) string {
	if sniffed := sniffMIME(data); sniffed != "" {
		return sniffed
	}
	if strings.HasPrefix(strings.ToLower(declared), kind+"/") {
		return declared
	}
	return "application/octet-stream"
}

// fixResourceMIME returns the MIME type to record for an embedded resource's
// bytes: the declared type unless it is missing or generic, in which case the
// bytes decide.
func fixResourceMIME(declared string, blob []byte) string {
	generic := declared == "" || strings.EqualFold(declared, "application/octet-stream")
	if !generic {
		return declared
	}
	if sniffed := sniffMIME(blob); sniffed != "" {
		return sniffed
	}
	return declared
}
