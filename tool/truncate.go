package tool

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Truncated returns the result as a model or a remote client should see it
// when it may be at most limit bytes: text is cut at a UTF-8 boundary with a
// marker saying how much was left out, and a binary block or a structured
// value that does not fit is replaced by a marker. Size is counted as the
// audit log counts it (text, media and blob bytes, URIs, the structured
// value's JSON). A result within the limit, an error result of toolwire's
// own (a refusal or failure, whose message is short), and any result when
// limit <= 0 are returned as they are; a tool's own error result is cut
// like any other. r itself is never changed, so the caller keeps the whole
// value.
func (r *Result) Truncated(limit int) *Result {
	if limit <= 0 || (r.IsError && r.Reason != ReasonTool) || r.size() <= limit {
		return r
	}
	out := *r
	out.Content = make([]Content, 0, len(r.Content)+1)
	left := limit
	omitted := 0
	for _, c := range r.Content {
		switch c := c.(type) {
		case *Text:
			kept := cutUTF8(c.Text, left)
			left -= len(kept)
			omitted += len(c.Text) - len(kept)
			if kept != "" {
				out.Content = append(out.Content, &Text{Text: kept})
			}
		case *Image:
			out.Content = append(out.Content, fitBinary(c, len(c.Data), "image "+c.MIMEType, &left, &omitted))
		case *Audio:
			out.Content = append(out.Content, fitBinary(c, len(c.Data), "audio "+c.MIMEType, &left, &omitted))
		case *Resource:
			if c.Blob != nil {
				out.Content = append(out.Content, fitBinary(c, len(c.Blob), "resource "+c.URI, &left, &omitted))
				continue
			}
			kept := cutUTF8(c.Text, left)
			left -= len(kept)
			omitted += len(c.Text) - len(kept)
			rc := *c
			rc.Text = kept
			out.Content = append(out.Content, &rc)
		default:
			out.Content = append(out.Content, c)
		}
	}
	if r.Structured != nil {
		if raw, err := json.Marshal(r.Structured); err == nil && len(raw) > left {
			out.Structured = nil
			omitted += len(raw)
		}
	}
	out.Content = append(out.Content, &Text{Text: fmt.Sprintf("\n[toolwire: result truncated: %d of %d bytes left out (limit %d)]", omitted, r.size(), limit)})
	return &out
}

// fitBinary keeps a binary block when it fits in what is left, else puts
// a marker in its place.
func fitBinary(c Content, size int, what string, left, omitted *int) Content {
	if size <= *left {
		*left -= size
		return c
	}
	*omitted += size
	return &Text{Text: fmt.Sprintf("[toolwire: %s of %d bytes left out: over the result size limit]", what, size)}
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
