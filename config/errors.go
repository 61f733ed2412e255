package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// problem is one located complaint about a configuration file: the error
// text and the warning text share this shape so that both read the same way.
type problem struct {
	file string
	line int
	col  int // set only for syntax errors, where the exact spot matters
	path string
	msg  string

	// For warnings: the server the warning is about ("" for the file) and
	// the path of the field inside that server's settings.
	server string
	field  string
}

// Error formats the problem as "file:line: path: message", or
// "file:line:col: message" for a syntax error: the shapes editors and
// terminals already know how to jump to.
func (p *problem) Error() string {
	var b strings.Builder
	switch {
	case p.file != "" && p.line > 0 && p.col > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", p.file, p.line, p.col)
	case p.file != "" && p.line > 0:
		fmt.Fprintf(&b, "%s:%d: ", p.file, p.line)
	case p.file != "":
		b.WriteString(p.file + ": ")
	case p.line > 0 && p.col > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", p.line, p.col)
	case p.line > 0:
		fmt.Fprintf(&b, "line %d: ", p.line)
	}
	if p.path != "" {
		b.WriteString(p.path + ": ")
	}
	b.WriteString(p.msg)
	return b.String()
}

// joinProblems returns the problems as one error in file order. Sorting is
// needed because a missing field is only noticed after the whole server has
// been read, yet it is reported at the server's key, above the fields.
func joinProblems(ps []*problem) error {
	if len(ps) == 0 {
		return nil
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].line < ps[j].line })
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// MissingVarError reports a ${VAR} placeholder whose variable is not set and
// which has no default.
type MissingVarError struct {
	Var string
}

// Error says which variable is missing.
func (e *MissingVarError) Error() string {
	return fmt.Sprintf("variable %s is not set", e.Var)
}

// MissingInputError reports an ${input:ID} placeholder that could not be
// resolved because nobody can be asked: there is no Resolver.Input.
type MissingInputError struct {
	ID          string
	Description string // the input's declared description, "" when it has none
}

// Error names the input and what it asks for, and how to provide it.
func (e *MissingInputError) Error() string {
	if e.Description != "" {
		return fmt.Sprintf("needs input %q (Ask: %q); run in a terminal to be prompted", e.ID, e.Description)
	}
	return fmt.Sprintf("needs input %q; run in a terminal to be prompted", e.ID)
}
