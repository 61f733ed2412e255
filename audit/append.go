package audit

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends ev's JSON to b, the bytes json.Marshal writes for it
// (its wire form, without a newline), and returns the extended buffer: with
// appendLine when it takes the event, else with encoding/json. A sink
// whose records are each event's JSON (the fleet's audit table) encodes
// with it: json.Marshal of an Event reflects over its wire form and then
// scans the result again, which was most of a replica's audit CPU.
func AppendJSON(b []byte, ev *Event) ([]byte, error) {
	if line, ok := appendLine(b, ev); ok {
		return line[:len(line)-1], nil
	}
	raw, err := json.Marshal(ev.wire())
	if err != nil {
		return b, err
	}
	return append(b, raw...), nil
}

// appendLine appends ev as encoding/json's Encoder writes its wire form
// (field order, omitempty, HTML-safe string escapes, the number and time
// formats) and a newline, and reports true; or appends nothing and
// reports false for an event it leaves to encoding/json: one carrying
// argument or result bytes (which encoding/json compacts) or a time
// encoding/json refuses. A sink writes each call's events with it: the
// reflective encoder cost a file-audited gateway more CPU than the rest of
// the audit's work on a call (docs/performance.md). FuzzAppendLine checks
// it against encoding/json byte for byte.
func appendLine(b []byte, ev *Event) ([]byte, bool) {
	if len(ev.Args) > 0 || len(ev.Result) > 0 || !plainTime(ev.Time) {
		return b, false
	}
	b = append(b, `{"time":"`...)
	b = ev.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":`...)
	b = appendJSONString(b, string(ev.Kind))
	b = appendStringField(b, `,"batch":`, ev.Batch)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(ev.Index), 10)
	b = appendStringField(b, `,"call_id":`, ev.CallID)
	b = appendStringField(b, `,"caller":`, ev.Caller)
	b = appendStringField(b, `,"instance":`, ev.Instance)
	b = appendStringField(b, `,"protocol":`, ev.Protocol)
	b = appendStringField(b, `,"client":`, ev.Client)
	b = appendStringField(b, `,"tool":`, ev.Tool)
	b = appendStringField(b, `,"source":`, ev.Source)
	b = appendStringField(b, `,"original":`, ev.Original)
	b = appendStringField(b, `,"tier":`, ev.Tier)
	b = appendIntField(b, `,"args_bytes":`, ev.ArgsBytes)
	b = appendIntField(b, `,"result_bytes":`, ev.ResultBytes)
	b = appendStringField(b, `,"reason":`, ev.Reason)
	b = appendStringField(b, `,"error":`, ev.Error)
	b = appendStringField(b, `,"upstream_identity":`, ev.UpstreamIdentity)
	b = appendStringField(b, `,"rule":`, ev.Rule)
	b = appendStringField(b, `,"transport":`, ev.Transport)
	b = appendIntField(b, `,"tools":`, ev.Tools)
	b = appendIntField(b, `,"attempt":`, ev.Attempt)
	b = appendListField(b, `,"added":`, ev.Added)
	b = appendListField(b, `,"removed":`, ev.Removed)
	b = appendListField(b, `,"changed":`, ev.Changed)
	b = appendStringField(b, `,"sandbox":`, ev.Sandbox)
	b = appendStringField(b, `,"fingerprint":`, ev.Fingerprint)
	b = appendStringField(b, `,"pinned":`, ev.Pinned)
	b = appendListField(b, `,"fields":`, ev.Fields)
	b = appendIntField(b, `,"limit":`, ev.Limit)
	if ev.Duration > 0 {
		b = append(b, `,"duration_ms":`...)
		b = appendJSONFloat(b, durationMillis(ev.Duration))
	}
	if ev.Backoff > 0 {
		b = append(b, `,"backoff_ms":`...)
		b = appendJSONFloat(b, durationMillis(ev.Backoff))
	}
	return append(b, "}\n"...), true
}

// plainTime reports whether t is a time encoding/json writes (years 0 to
// 9999, an offset within a day), so that its RFC 3339 form is the same.
func plainTime(t time.Time) bool {
	_, offset := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && offset > -24*3600 && offset < 24*3600
}

func appendStringField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
}

func appendIntField(b []byte, key string, n int) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(n), 10)
}

func appendListField(b []byte, key string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(b, key...)
	for i, s := range list {
		if i == 0 {
			b = append(b, '[')
		} else {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONFloat appends f as encoding/json writes a float64: as
// ECMAScript does, exponent notation only below 1e-6 and from 1e21.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07, as strconv writes it, is e-7 in encoding/json's form.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes a string with
// HTML escaping on: ", \ and the control characters escaped, <, > and &
// as \u003c, \u003e and \u0026, invalid UTF-8 as \ufffd, and U+2028 and
// U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
