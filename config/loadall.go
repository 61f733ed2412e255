package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// DialectMixed is the Dialect of a File that [LoadAll] combined from files
// of different dialects.
const DialectMixed = "mixed"

// LoadAll loads each file as [Load] does and combines them into one File:
// the servers of every file, in order, and each section (audit, security,
// agent, gateway, policy) from the one file that has it. A server name defined in
// two files is an error naming both places. A section in two files is an
// error naming both files too, rather than a silent pick: preferring one
// file's tokens or approvals over another's, say, is how a gateway ends up
// open. An input declared in two files must be declared alike. Every
// problem of every file is reported, joined; with one path, LoadAll is
// Load. No path at all is an error.
func LoadAll(paths []string) (*File, error) {
	switch len(paths) {
	case 0:
		return nil, errors.New("no configuration file to load")
	case 1:
		return Load(paths[0])
	}
	merged := &File{Path: strings.Join(paths, ", "), Inputs: map[string]Input{}}
	where := map[string]string{}
	gatewayFrom, securityFrom, agentFrom, auditFrom := "", "", "", ""
	var errs []error
	for _, p := range paths {
		f, err := Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if merged.Dialect == "" {
			merged.Dialect = f.Dialect
		} else if merged.Dialect != f.Dialect {
			merged.Dialect = DialectMixed
		}
		for _, s := range f.Servers {
			at := fmt.Sprintf("%s:%d", p, s.Line)
			if first, dup := where[s.Name]; dup {
				errs = append(errs, fmt.Errorf("%s: server %q is also defined at %s; rename one", at, s.Name, first))
				continue
			}
			where[s.Name] = at
			merged.Servers = append(merged.Servers, s)
		}
		if f.Audit != (Audit{}) {
			if auditFrom != "" {
				errs = append(errs, fmt.Errorf("%s: audit: also configured in %s; only one configuration file may have an audit section", p, auditFrom))
			} else {
				merged.Audit, auditFrom = f.Audit, p
			}
		}
		if f.Gateway != nil {
			if merged.Gateway != nil {
				errs = append(errs, fmt.Errorf("%s:%d: gateway: also configured at %s:%d; only one configuration file may have a gateway section",
					p, f.Gateway.Line, gatewayFrom, merged.Gateway.Line))
			} else {
				merged.Gateway, gatewayFrom = f.Gateway, p
			}
		}
		if f.Policy != nil {
			if merged.Policy != nil {
				errs = append(errs, fmt.Errorf("%s:%d: policy: also configured at %s:%d; only one configuration file may have a policy section (rules apply in file order)",
					p, f.Policy.Line, merged.Policy.File, merged.Policy.Line))
			} else {
				merged.Policy = f.Policy
			}
		}
		if f.Agent != (Agent{}) {
			if agentFrom != "" {
				errs = append(errs, fmt.Errorf("%s: agent: also configured in %s; only one configuration file may have an agent section", p, agentFrom))
			} else {
				merged.Agent, agentFrom = f.Agent, p
			}
		}
		if !reflect.DeepEqual(f.Security, Security{}) {
			if securityFrom != "" {
				errs = append(errs, fmt.Errorf("%s: security: also configured in %s; only one configuration file may have a security section", p, securityFrom))
			} else {
				merged.Security, securityFrom = f.Security, p
			}
		}
		for id, in := range f.Inputs {
			if prev, dup := merged.Inputs[id]; dup && prev != in {
				errs = append(errs, fmt.Errorf("%s: input %q is also declared, differently, in an earlier file; declare it once", p, id))
				continue
			}
			merged.Inputs[id] = in
		}
		merged.Warnings = append(merged.Warnings, f.Warnings...)
		merged.WarningDetails = append(merged.WarningDetails, f.WarningDetails...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return merged, nil
}
