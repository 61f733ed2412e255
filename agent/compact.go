package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/tool"
)

// Default budgets for what one result may put in front of the model.
const (
	DefaultResultBudget = 16 << 10 // bytes of text
	DefaultImageBudget  = 1 << 20  // bytes of image data
)

// imageTypes are the image formats every provider here takes; others are
// described in text instead.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// compact turns a call's result into what the model is shown: its text,
// cut to textBudget bytes, and its images while their bytes fit
// imageBudget. The cut keeps the start and the end of the text and says
// how much was left out, so the model knows the result was longer; the
// whole result stays with the caller (see [Step].Result).
func compact(call ToolCall, res *tool.Result, textBudget, imageBudget int) ToolResult {
	out := ToolResult{CallID: call.ID, Name: call.Name, IsError: res.IsError}
	if res.IsError {
		out.Parts = []Part{{Text: errorText(res)}}
		return cutText(out, textBudget)
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *tool.Text:
			out.Parts = append(out.Parts, Part{Text: c.Text})
		case *tool.Image:
			stand := fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data))
			if imageTypes[c.MIMEType] && len(c.Data) <= imageBudget {
				imageBudget -= len(c.Data)
				out.Parts = append(out.Parts, Part{Text: stand, Image: c})
			} else {
				out.Parts = append(out.Parts, Part{Text: stand + " (not shown)"})
			}
		case *tool.Audio:
			out.Parts = append(out.Parts, Part{Text: fmt.Sprintf("[audio %s, %d bytes, not shown]", c.MIMEType, len(c.Data))})
		case *tool.Resource:
			if c.Text != "" {
				out.Parts = append(out.Parts, Part{Text: fmt.Sprintf("[resource %s]\n%s", c.URI, c.Text)})
			} else {
				out.Parts = append(out.Parts, Part{Text: fmt.Sprintf("[resource %s, %s, %d bytes, not shown]", c.URI, c.MIMEType, len(c.Blob))})
			}
		case *tool.ResourceLink:
			desc := c.Name
			if c.Description != "" {
				desc += ": " + c.Description
			}
			out.Parts = append(out.Parts, Part{Text: fmt.Sprintf("[link %s %s]", c.URI, desc)})
		}
	}
	if len(res.Content) == 0 {
		text := "(no content)"
		if res.Structured != nil {
			if b, err := json.Marshal(res.Structured); err == nil {
				text = string(b)
			}
		}
		out.Parts = []Part{{Text: text}}
	}
	return cutText(out, textBudget)
}

// errorText is what the model reads for an error result. The executor's
// messages already say what to do (fix the named arguments, do not retry a
// declined call); the reason in front makes the kind of failure plain.
func errorText(res *tool.Result) string {
	msg := res.Message
	if text := res.Text(); text != "" && text != msg {
		msg += "\n" + text
	}
	switch res.Reason {
	case tool.ReasonDeclined:
		return "error (declined): " + msg + ". The user refused this call: do not call it again; continue without it or explain what you would have done."
	case tool.ReasonUnconfirmed:
		return "error (not confirmed): " + msg + ". Nobody was there to confirm this call, so it did not run; the user did not refuse it. Tell the user it needs their confirmation (or an approval such as --yes) instead of calling it again."
	case ToolCutReason:
		return "error (cut off): " + msg
	case tool.ReasonInvalidArgs:
		return "error (invalid arguments): " + msg + ". Nothing was run; correct the arguments and call again."
	case tool.ReasonUnknownTool:
		return "error (unknown tool): " + msg + ". Use only the tools you were given."
	}
	return fmt.Sprintf("error (%s): %s", res.Reason, msg)
}

// cutText keeps at most budget bytes of the result's text. When the text
// is longer, the part where the budget runs out keeps its head and tail
// around a note of what was left out, and later text parts are dropped;
// images are kept, their stand-ins cost nothing.
func cutText(r ToolResult, budget int) ToolResult {
	total := 0
	for _, p := range r.Parts {
		if p.Image == nil {
			total += len(p.Text)
		}
	}
	if total <= budget {
		return r
	}
	left := budget
	kept := r.Parts[:0:0]
	omitted := 0
	for _, p := range r.Parts {
		if p.Image != nil {
			kept = append(kept, p)
			continue
		}
		switch {
		case left <= 0:
			omitted += len(p.Text)
		case len(p.Text) <= left:
			kept = append(kept, p)
			left -= len(p.Text)
		default:
			head := truncateUTF8(p.Text, left*2/3)
			tail := tailUTF8(p.Text, left-len(head))
			omitted += len(p.Text) - len(head) - len(tail)
			kept = append(kept, Part{Text: head + "\n…[cut]…\n" + tail})
			left = 0
		}
	}
	kept = append(kept, Part{Text: fmt.Sprintf("[result compacted: %d of %d bytes of text left out to fit %d bytes; the caller keeps the whole result]", omitted, total, budget)})
	r.Parts = kept
	return r
}

// tailUTF8 returns at most the last n bytes of s without splitting a
// character.
func tailUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// partsText joins a result's parts as text, for providers or messages that
// take text only.
func partsText(parts []Part) string {
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	return strings.Join(texts, "\n")
}
