package config

import (
	"fmt"
	"strings"
)

// template checks one string field that may hold placeholders, at load
// time where the line is known, rather than at connect time: malformed
// placeholders and inputs that are not declared are reported. In host
// dialects it first replaces ${workspaceFolder} with the project directory
// and ${userHome} with ${HOME}. It records the inputs the server uses.
func (d *decoder) template(st *serverState, line int, path, s string) (string, bool) {
	if d.host && strings.Contains(s, "${") {
		s = rewritePlaceholders(s, func(body string) (string, bool) {
			switch body {
			case "workspaceFolder":
				if d.workspace == "" {
					return "", false
				}
				return escapeDollars(d.workspace), true
			case "userHome":
				return "${HOME}", true
			}
			return "", false
		})
	}
	_, _, err := expand(s, func(string) (string, bool) { return "", true }, func(id string) (string, error) {
		in, ok := d.inputs[id]
		if !ok {
			return "", d.undeclaredInput(id)
		}
		if st.s.Inputs == nil {
			st.s.Inputs = map[string]Input{}
		}
		st.s.Inputs[id] = in
		return "", nil
	})
	if err != nil {
		d.errorf(line, path, "%s", err)
		return s, false
	}
	return s, true
}

func (d *decoder) undeclaredInput(id string) error {
	switch {
	case d.otherInputs[id] != "":
		return fmt.Errorf(`input %q is a %q input, which toolwire cannot ask for (only "promptString")`, id, d.otherInputs[id])
	case d.inputsAllowed:
		return fmt.Errorf(`input %q is not declared in "inputs"`, id)
	}
	return fmt.Errorf(`${input:%s} needs an "inputs" declaration, which only VS Code's and toolwire's files have`, id)
}

// escapeDollars makes a literal value safe to put into a string that will
// be expanded later.
func escapeDollars(s string) string {
	return strings.ReplaceAll(s, "$", "$$")
}

// rewritePlaceholders replaces the ${...} placeholders for which f returns
// true, leaving "$$" escapes, other placeholders and malformed text as they
// are (the expansion check reports those).
func rewritePlaceholders(s string, f func(body string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteString("$$")
			i += 2
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			whole := s[i : i+2+end+1]
			if r, ok := f(s[i+2 : i+2+end]); ok {
				b.WriteString(r)
			} else {
				b.WriteString(whole)
			}
			i += len(whole)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}
