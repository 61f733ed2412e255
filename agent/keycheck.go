package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// keyCheckTimeout bounds [OpenAI.CheckKey] and [Anthropic.CheckKey]: the
// check must not hold up a start for long.
const keyCheckTimeout = 10 * time.Second

// CheckKey finds out cheaply whether the endpoint takes the API key,
// before anything costly (starting MCP servers, say) is done: it lists
// the models (GET /models with the key), which costs no tokens. Only a
// refusal (401 or 403) is an error, an [ErrUnauthorized] *ProviderError;
// an endpoint that cannot be reached or has no such listing (many local
// servers) passes, and the first real request explains what is wrong.
func (p *OpenAI) CheckKey(ctx context.Context) error {
	return p.ep.checkKey(ctx, p.hc, joinURL(p.ep.baseURL, "models"), func(h http.Header) {
		if p.key != "" {
			h.Set("Authorization", "Bearer "+p.key)
		}
	})
}

// CheckKey is [OpenAI.CheckKey] for the Messages API: GET /v1/models
// with the key.
func (p *Anthropic) CheckKey(ctx context.Context) error {
	return p.ep.checkKey(ctx, p.hc, joinURL(p.ep.baseURL, "v1/models"), func(h http.Header) {
		h.Set("Anthropic-Version", "2023-06-01")
		if p.key != "" {
			h.Set("X-Api-Key", p.key)
		}
	})
}

func (ep *endpoint) checkKey(ctx context.Context, hc *http.Client, url string, auth func(http.Header)) error {
	ctx, cancel := context.WithTimeout(ctx, keyCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	auth(req.Header)
	resp, err := hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return ep.statusError(resp.StatusCode, resp.Header, errorMessage(body), nil)
}

// errorMessage picks the message out of an error body in the shape both
// APIs use ({"error":{"message":…}}), or returns the body as it is.
func errorMessage(body []byte) string {
	var v struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && v.Error.Message != "" {
		return v.Error.Message
	}
	return string(body)
}

// joinURL is base with path after it, one slash between, whether or not
// base ends in one.
func joinURL(base, path string) string {
	return strings.TrimSuffix(base, "/") + "/" + path
}
