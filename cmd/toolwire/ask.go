package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/toolwire/toolwire/tool"
)

// terminalCaller is the caller of toolwire call on a terminal: it shows
// progress as progressPrinter does and answers a server's questions
// (elicitation, in form mode) by asking on the terminal, through the
// confirmer's reader, one question at a time. Sampling it cannot answer:
// the CLI has no model.
type terminalCaller struct {
	*progressPrinter
	term *terminalConfirmer
}

// elicitForm is the part of elicitation/create's parameters the prompt
// uses: a message and a flat object schema of primitive fields.
type elicitForm struct {
	Mode            string `json:"mode"`
	Message         string `json:"message"`
	RequestedSchema struct {
		Properties map[string]formField `json:"properties"`
		Required   []string             `json:"required"`
	} `json:"requestedSchema"`
}

// formField is one field of an elicitation's form (MCP's primitive
// schema definitions).
type formField struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Default     json.RawMessage `json:"default"`
	Enum        []string        `json:"enum"`
	EnumNames   []string        `json:"enumNames"`
	OneOf       []struct {
		Const string `json:"const"`
		Title string `json:"title"`
	} `json:"oneOf"`
}

// choices returns the values a field may take and their labels, or nil for
// a free one.
func (f formField) choices() (values, labels []string) {
	for _, o := range f.OneOf {
		values = append(values, o.Const)
		labels = append(labels, cmpOr(o.Title, o.Const))
	}
	for i, v := range f.Enum {
		values = append(values, v)
		label := v
		if i < len(f.EnumNames) {
			label = f.EnumNames[i]
		}
		labels = append(labels, label)
	}
	return values, labels
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Ask answers an elicitation by asking on the terminal: the server's
// message (escaped, and marked as the server's words), whether to answer at
// all, then each field. Declining gives "decline"; Ctrl-C ends the call.
func (c *terminalCaller) Ask(ctx context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	if kind != tool.Elicitation {
		return nil, fmt.Errorf("%s: %w (the command line has no model)", kind, tool.ErrNotSupported)
	}
	var form elicitForm
	if err := json.Unmarshal(params, &form); err != nil {
		return nil, fmt.Errorf("elicitation: %w", err)
	}
	if form.Mode != "" && form.Mode != "form" {
		return nil, fmt.Errorf("elicitation in %s mode: %w", form.Mode, tool.ErrNotSupported)
	}
	t := c.term
	t.mu.Lock()
	defer t.mu.Unlock()
	from := ""
	if ci, ok := tool.CallInfoFrom(ctx); ok {
		from = " (for " + termSafe(ci.Name) + ")"
	}
	fmt.Fprintf(t.out, "\nThe server asks%s, in its own words:\n  %s\n", from, strings.ReplaceAll(termSafe(form.Message), "\n", "\n  "))
	yes, err := t.readLine(ctx, "Answer? [y/N] ")
	if err != nil {
		return nil, err
	}
	if a := strings.ToLower(yes); a != "y" && a != "yes" {
		return json.Marshal(map[string]any{"action": "decline"})
	}
	content := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(form.RequestedSchema.Properties)) {
		f := form.RequestedSchema.Properties[name]
		v, ok, err := t.askField(ctx, name, f, slices.Contains(form.RequestedSchema.Required, name))
		if err != nil {
			return nil, err
		}
		if ok {
			content[name] = v
		}
	}
	return json.Marshal(map[string]any{"action": "accept", "content": content})
}

// askField asks for one field until the answer fits it; a blank answer
// takes the default, or leaves an optional field out.
func (t *terminalConfirmer) askField(ctx context.Context, name string, f formField, required bool) (any, bool, error) {
	label := termSafe(cmpOr(f.Title, name))
	if f.Description != "" {
		label += " (" + termSafe(f.Description) + ")"
	}
	values, labels := f.choices()
	if len(values) > 0 {
		fmt.Fprintf(t.out, "  %s:\n", label)
		for i, l := range labels {
			fmt.Fprintf(t.out, "    %d) %s\n", i+1, termSafe(l))
		}
	}
	def := ""
	if len(f.Default) > 0 {
		def = strings.Trim(string(f.Default), `"`)
	}
	for {
		prompt := "  " + label
		if len(values) > 0 {
			prompt = fmt.Sprintf("  choose 1-%d", len(values))
		}
		switch {
		case def != "":
			prompt += " [" + termSafe(def) + "]"
		case f.Type == "boolean":
			prompt += " [y/n]"
		case !required:
			prompt += " (optional)"
		}
		line, err := t.readLine(ctx, prompt+": ")
		if err != nil {
			return nil, false, err
		}
		if line == "" && def != "" {
			var v any
			if json.Unmarshal(f.Default, &v) == nil {
				return v, true, nil
			}
		}
		if line == "" && !required {
			return nil, false, nil
		}
		v, ok := fieldValue(f, values, line)
		if ok {
			return v, true, nil
		}
		fmt.Fprintf(t.out, "  that is not a valid %s\n", cmpOr(f.Type, "answer"))
	}
}

// fieldValue reads an answer as the field's type, or reports that it does
// not fit.
func fieldValue(f formField, values []string, line string) (any, bool) {
	if len(values) > 0 {
		if i, err := strconv.Atoi(line); err == nil && i >= 1 && i <= len(values) {
			return values[i-1], true
		}
		if slices.Contains(values, line) {
			return line, true
		}
		return nil, false
	}
	switch f.Type {
	case "boolean":
		switch strings.ToLower(line) {
		case "y", "yes", "true":
			return true, true
		case "n", "no", "false":
			return false, true
		}
		return nil, false
	case "integer":
		n, err := strconv.ParseInt(line, 10, 64)
		return n, err == nil
	case "number":
		n, err := strconv.ParseFloat(line, 64)
		return n, err == nil
	}
	return line, line != ""
}

// readLine shows prompt and reads one line, trimmed; a cancelled context
// (Ctrl-C) ends the wait. t.mu is held.
func (t *terminalConfirmer) readLine(ctx context.Context, prompt string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if t.lines == nil {
		t.lines = newLineReader(t.in)
	}
	fmt.Fprint(t.out, prompt)
	line, _ := t.lines.read(ctx)
	if err := ctx.Err(); err != nil {
		fmt.Fprintln(t.out)
		return "", err
	}
	return strings.TrimSpace(line), nil
}
