package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// commandExamples are the Examples sections of the commands' --help, by
// command path. Each line that starts with "toolwire" (after any VAR=value
// words) is a command that parses as written: TestEveryCommandHasExamplesThatParse.
var commandExamples = map[string]string{
	"toolwire": `toolwire tools                                # the tools of ./toolwire.yaml's servers
toolwire --config .vscode/mcp.json tools      # any host's file works as it is
toolwire call files__read_text_file path=/srv/shared/a.txt
toolwire config check                         # what toolwire understood of the file`,
	"toolwire tools": `toolwire tools
toolwire tools --server files --server search  # only these servers (only they start)
toolwire tools --json`,
	"toolwire call": `toolwire call files__read_text_file path=/srv/shared/a.txt
toolwire call search__search query="mcp spec" limit=5
toolwire call files__write_file --args '{"path":"/srv/shared/a.txt","content":"hi"}' --yes
toolwire call files__get_file_info path=/srv/shared/a.txt --json`,
	"toolwire servers": `toolwire servers
toolwire servers --watch
toolwire servers --json`,
	"toolwire serve": `toolwire serve --stdio                          # for an MCP host that starts toolwire
toolwire serve --http 127.0.0.1:8080            # Streamable HTTP at http://127.0.0.1:8080/mcp
toolwire serve --http :8443 --tls-cert cert.pem --tls-key key.pem`,
	"toolwire run": `OPENAI_API_KEY=... toolwire run --model gpt-4.1-mini "summarise /srv/shared/a.txt"
toolwire run --provider anthropic --model claude-sonnet-4-5 "list the open issues"
toolwire run --base-url http://127.0.0.1:11434/v1 --model qwen3 "what files are in /srv/shared?"`,
	"toolwire chat": `toolwire chat --model gpt-4.1-mini
toolwire chat --provider anthropic --model claude-sonnet-4-5 --yes`,
	"toolwire config":            `toolwire config check .vscode/mcp.json`,
	"toolwire config check":      "toolwire config check\ntoolwire config check .vscode/mcp.json\ntoolwire config check --json claude_desktop_config.json",
	"toolwire config import":     "toolwire config import .vscode/mcp.json\ntoolwire config import .vscode/mcp.json -o toolwire.yaml",
	"toolwire pins":              "toolwire pins list\ntoolwire pins approve files",
	"toolwire approvals":         "toolwire approvals pending\ntoolwire approvals approve 5d1c07a9e2f48b36 --scope args\ntoolwire approvals list\ntoolwire approvals revoke 3f2a9c0d41b7e865",
	"toolwire approvals pending": "toolwire approvals pending                          # the calls waiting, with their arguments\ntoolwire approvals pending --json",
	"toolwire approvals approve": "toolwire approvals approve 5d1c07a9e2f48b36                      # this call only\ntoolwire approvals approve 5d1c07a9e2f48b36 --scope args           # and later calls with these arguments, for a day\ntoolwire approvals approve 5d1c07a9e2f48b36 --scope tool --for 30m # and every call of the tool for 30 minutes",
	"toolwire approvals deny":    "toolwire approvals deny 5d1c07a9e2f48b36 --reason \"not during the freeze\"\ntoolwire approvals deny 5d1c07a9e2f48b36 --scope tool --for 2h     # and refuse the tool's calls for two hours",
	"toolwire approvals list":    "toolwire approvals list\ntoolwire approvals list --json",
	"toolwire approvals revoke":  "toolwire approvals revoke 3f2a9c0d41b7e865            # one approval, by the ID list shows\ntoolwire approvals revoke 3f2a9c0d41b7e865 9b1e04c7a2d35f68",
	"toolwire pins list":         "toolwire pins list\ntoolwire pins list files --json",
	"toolwire pins approve":      "toolwire pins approve files                  # every tool of the server\ntoolwire pins approve files/write_file       # one tool",
	"toolwire pins forget":       "toolwire pins forget files\ntoolwire pins forget files/write_file",
	"toolwire audit":             "toolwire audit verify audit.jsonl",
	"toolwire audit verify":      "toolwire audit verify audit.jsonl\ntoolwire audit verify audit.jsonl --public-key audit.pub",
	"toolwire audit keygen":      "toolwire audit keygen --out audit       # writes audit.key and audit.pub",
	"toolwire token":             "toolwire token new",
	"toolwire token new":         "toolwire token new",
	"toolwire token hash":        "toolwire token hash < token.txt\ntoolwire token new | tee token.txt | toolwire token hash",
	"toolwire login":             "toolwire login remote\ntoolwire login remote --no-browser",
	"toolwire logout":            "toolwire logout remote",
	"toolwire auth":              "toolwire auth status",
	"toolwire auth status":       "toolwire auth status\ntoolwire auth status --json",
	"toolwire oauth":             "toolwire oauth metadata --url https://example.com/toolwire-client.json",
	"toolwire oauth metadata": "toolwire oauth metadata --url https://example.com/toolwire-client.json\n" +
		"toolwire oauth metadata remote             # the URL of remote's oauth.clientMetadataUrl",
	"toolwire version": "toolwire version",
}

// addExamples gives every command its Examples section, indented as
// cobra's help shows it.
func addExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := commandExamples[c.CommandPath()]; ok && c.Example == "" {
			c.Example = "  " + strings.ReplaceAll(ex, "\n", "\n  ")
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
