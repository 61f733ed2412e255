package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/internal/version"
)

// versionInfo is what "toolwire version" reports, from the binary's own
// build information: the module's version (a tag when built with
// "go install ...@vX", "(devel)" from a checkout), the VCS commit it was
// built from, and the go-sdk it speaks MCP with.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"` // uncommitted changes
	GoSDK    string `json:"goSDK,omitempty"`
	Go       string `json:"go"`
}

const goSDKPath = "github.com/modelcontextprotocol/go-sdk"

func buildVersion() versionInfo {
	v := versionInfo{Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	return versionFrom(bi)
}

func versionFrom(bi *debug.BuildInfo) versionInfo {
	// The release it was built from, or the tree's own version for a
	// build from a checkout: what its MCP handshakes announce too.
	v := versionInfo{Version: cmp.Or(version.Of(bi), version.Base+" (devel)"), Go: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		if d.Path == goSDKPath {
			v.GoSDK = d.Version
			if d.Replace != nil {
				v.GoSDK = d.Replace.Version
			}
		}
	}
	return v
}

// String is the one line of "toolwire --version".
func (v versionInfo) String() string {
	s := "toolwire " + v.Version
	if v.Commit != "" {
		s += " (commit " + v.Commit
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	if v.GoSDK != "" {
		s += ", go-sdk " + v.GoSDK
	}
	return s + ", " + v.Go
}

func newVersionCommand(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print toolwire's version, commit and go-sdk version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := buildVersion()
			if !asJSON {
				fmt.Fprintln(e.stdout, v)
				return nil
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as a JSON object: version, commit, modified, goSDK, go")
	return cmd
}
