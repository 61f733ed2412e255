package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/oauth"
)

// newOAuthCommand is `toolwire oauth`: what an operator publishes for
// toolwire's OAuth client.
func newOAuthCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "oauth", Short: "What to publish for toolwire's OAuth client", Args: cobra.NoArgs}
	var metaURL, name string
	var redirects []string
	meta := &cobra.Command{
		Use:   "metadata [SERVER]",
		Short: "Print the Client ID Metadata Document to publish at a server's oauth.clientMetadataUrl",
		Long: `Print the Client ID Metadata Document (JSON) to publish at the https URL a
server's oauth.clientMetadataUrl names (or --url). Authorization servers that
advertise client_id_metadata_document_supported fetch it, and toolwire uses
the URL as its client_id there instead of registering a client. The document
describes toolwire as a public native client whose redirect is the loopback
receiver of "toolwire login" (http://127.0.0.1/callback, any port).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u := metaURL
			if len(args) == 1 {
				if u != "" {
					return &exitError{exitUsage, fmt.Errorf("give SERVER or --url, not both")}
				}
				file, err := loadConfig(e, g)
				if err != nil {
					return err
				}
				srv, err := remoteServer(file, args[0])
				if err != nil {
					return err
				}
				if srv.OAuth == nil || srv.OAuth.ClientMetadataURL == "" {
					return &exitError{exitUsage, fmt.Errorf("server %q: no oauth.clientMetadataUrl in the configuration", srv.Name)}
				}
				u = srv.OAuth.ClientMetadataURL
			}
			if u == "" {
				return &exitError{exitUsage, fmt.Errorf("give SERVER (with oauth.clientMetadataUrl) or --url")}
			}
			doc, err := oauth.ClientMetadataDocument(u, name, redirects)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			fmt.Fprintf(e.stdout, "%s\n", doc)
			return nil
		},
	}
	meta.Flags().StringVar(&metaURL, "url", "", "the https URL the document is published at (its client_id)")
	meta.Flags().StringVar(&name, "name", "toolwire", "the client_name authorization servers show")
	meta.Flags().StringArrayVar(&redirects, "redirect-uri", nil, "a redirect URI to list instead of the loopback receiver (repeatable)")
	cmd.AddCommand(meta)
	return cmd
}
