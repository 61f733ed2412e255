package policy

import (
	"fmt"
	"net/mail"
	"path"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
)

// The struct types every rule sees, with their fields. Runtime values are
// maps: what a rule may read is fixed here, so that a misspelt field is
// an error when the rule is checked, not a value that is never there.
var (
	callerFields = map[string]*types.Type{
		"subject":    types.StringType,
		"issuer":     types.StringType,
		"role":       types.StringType,
		"credential": types.StringType,
		"claims":     types.NewMapType(types.StringType, types.DynType),
	}
	toolFields = map[string]*types.Type{
		"name":       types.StringType,
		"server":     types.StringType,
		"upstream":   types.StringType,
		"tier":       types.StringType,
		"tierSource": types.StringType,
		"pin":        types.StringType,
	}
	resultFields = map[string]*types.Type{
		"text":       types.StringType,
		"structured": types.DynType,
		"isError":    types.BoolType,
	}
)

const (
	callerTypeName = "toolwire.Caller"
	toolTypeName   = "toolwire.Tool"
	resultTypeName = "toolwire.Result"
)

// costLimit bounds what one rule may compute on one call, so that a rule
// over a huge argument (a comprehension over a long list) cannot hold a
// call: past it, the rule fails, and a failed rule denies.
const costLimit = 1_000_000

// provider declares the struct types a rule is checked against (the
// caller, the tool, the result, and one tool's arguments) over CEL's own
// registry. Its types have no field getters: CEL then reads fields of
// the maps the rules are given, by key.
type provider struct {
	*types.Registry // CEL's own types, and where its options register more
	structs         map[string]map[string]*types.Type
}

// newProvider returns a provider over a copy of from (over CEL's own
// types when from is nil) that declares args's struct types.
func newProvider(from *provider, args *shape) (*provider, error) {
	var base *types.Registry
	if from != nil {
		base = from.Registry.Copy()
	} else {
		var err error
		if base, err = types.NewRegistry(); err != nil {
			return nil, err
		}
	}
	p := &provider{Registry: base, structs: map[string]map[string]*types.Type{
		callerTypeName: callerFields, toolTypeName: toolFields, resultTypeName: resultFields,
	}}
	if args != nil {
		args.structs(p.structs)
	}
	return p, nil
}

func (p *provider) EnumValue(name string) ref.Val { return p.Registry.EnumValue(name) }

func (p *provider) FindIdent(name string) (ref.Val, bool) { return p.Registry.FindIdent(name) }

func (p *provider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

func (p *provider) FindStructFieldNames(name string) ([]string, bool) {
	if fields, ok := p.structs[name]; ok {
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
		return names, true
	}
	return p.Registry.FindStructFieldNames(name)
}

func (p *provider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if fields, ok := p.structs[name]; ok {
		t, ok := fields[field]
		if !ok {
			return nil, false
		}
		return &types.FieldType{Type: t}, true
	}
	return p.Registry.FindStructFieldType(name, field)
}

func (p *provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.structs[name]; ok {
		return types.NewErr("a rule cannot construct %s", name)
	}
	return p.Registry.NewValue(name, fields)
}

// baseEnv returns the environment every rule is parsed in: CEL's standard
// library, its string extensions, the caller and the tool, and the
// functions paths and addresses need.
func baseEnv() (*cel.Env, error) {
	p, err := newProvider(nil, nil)
	if err != nil {
		return nil, err
	}
	return cel.NewEnv(
		cel.CustomTypeProvider(p),
		cel.EnableIdentifierEscapeSyntax(),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		cel.Variable("caller", cel.ObjectType(callerTypeName)),
		cel.Variable("tool", cel.ObjectType(toolTypeName)),
		cel.Function("clean",
			cel.Overload("clean_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return types.String(path.Clean(string(v.(types.String)))) }))),
		cel.Function("within",
			cel.Overload("within_string_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(func(p, dir ref.Val) ref.Val {
					return types.Bool(Within(string(p.(types.String)), string(dir.(types.String))))
				}))),
		cel.Function("emailDomain",
			cel.Overload("emailDomain_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					d, err := EmailDomain(string(v.(types.String)))
					if err != nil {
						return types.NewErrFromString(err.Error())
					}
					return types.String(d)
				}))),
	)
}

// toolEnv extends base with args of the given shape (and, for a rule on
// results, the result).
func toolEnv(base *cel.Env, args *shape, onResult bool) (*cel.Env, error) {
	from, _ := base.CELTypeProvider().(*provider)
	p, err := newProvider(from, args)
	if err != nil {
		return nil, err
	}
	opts := []cel.EnvOption{cel.CustomTypeProvider(p), cel.Variable("args", args.celType())}
	if onResult {
		opts = append(opts, cel.Variable("result", cel.ObjectType(resultTypeName)))
	}
	return base.Extend(opts...)
}

// Within reports whether p names dir or something under it once "." and
// ".." are resolved the way a file system resolves them from the root: a
// path that climbs out ("/srv/shared/../etc") is not within. A relative
// p is never within: what it names depends on a directory the rule does
// not know. It is lexical: a symbolic link under dir that points out of it
// is not seen.
func Within(p, dir string) bool {
	if !strings.HasPrefix(p, "/") || !strings.HasPrefix(dir, "/") || strings.ContainsRune(p, 0) {
		return false
	}
	p, dir = path.Clean(p), path.Clean(dir)
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// EmailDomain returns the domain of one email address, lower-cased: the
// address alone ("a@example.com") or with a display name ("A <a@example.com>").
// Anything else (a list of addresses, no address, a route) is an error, so
// that a rule on the domain cannot be passed by an address it misreads.
func EmailDomain(s string) (string, error) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return "", fmt.Errorf("emailDomain: %q is not one email address: %v", s, err)
	}
	at := strings.LastIndexByte(a.Address, '@')
	if at < 0 || at == len(a.Address)-1 {
		return "", fmt.Errorf("emailDomain: %q has no domain", s)
	}
	return strings.ToLower(a.Address[at+1:]), nil
}
