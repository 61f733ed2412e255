package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	templateURI = "test://template/{id}/data"
	watchedURI  = "test://watched-resource"
)

func addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI: "test://static-text", Name: "static-text", MIMEType: "text/plain",
		Description: "A static text resource",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return contents(&mcp.ResourceContents{URI: req.Params.URI, MIMEType: "text/plain",
			Text: "This is the content of the static text resource."}), nil
	})
	s.AddResource(&mcp.Resource{
		URI: "test://static-binary", Name: "static-binary", MIMEType: "image/png",
		Description: "A static binary resource (a PNG image)",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return contents(&mcp.ResourceContents{URI: req.Params.URI, MIMEType: "image/png", Blob: testPNG()}), nil
	})
	s.AddResource(&mcp.Resource{
		URI: watchedURI, Name: "watched-resource", MIMEType: "text/plain",
		Description: "A resource whose subscribers get notifications/resources/updated every 3 seconds",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return contents(&mcp.ResourceContents{URI: req.Params.URI, MIMEType: "text/plain",
			Text: "Watched resource content at " + time.Now().UTC().Format(time.RFC3339)}), nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: templateURI, Name: "template", MIMEType: "application/json",
		Description: "A JSON document for any id",
	}, readTemplate)
}

func contents(c *mcp.ResourceContents) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}
}

// readTemplate reads test://template/{id}/data; the id appears in the content.
func readTemplate(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, "test://template/")
	if ok {
		id, ok = strings.CutSuffix(id, "/data")
	}
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	text := fmt.Sprintf(`{"id":%q,"templateTest":true,"data":"Data for ID: %s"}`, id, id)
	return contents(&mcp.ResourceContents{URI: uri, MIMEType: "application/json", Text: text}), nil
}

// subscribe and unsubscribe accept any URI; go-sdk keeps track of the
// subscriptions and sends resources/updated only to subscribed sessions.
func subscribe(context.Context, *mcp.SubscribeRequest) error     { return nil }
func unsubscribe(context.Context, *mcp.UnsubscribeRequest) error { return nil }

// notifyWatchedResource reports test://watched-resource as updated every
// interval until ctx is done.
func notifyWatchedResource(ctx context.Context, s *mcp.Server, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}) //nolint:errcheck // best effort
		}
	}
}
