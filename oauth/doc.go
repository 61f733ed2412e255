// Package oauth authorizes toolwire with OAuth 2.1 at remote MCP servers,
// on top of go-sdk's auth package, and keeps what it obtains so that
// neither a restart nor a second process asks the user again.
//
// Parts:
//
//   - [Store]: one encrypted file (AES-256-GCM; key from Argon2id over
//     TOOLWIRE_PASSPHRASE, or a 0600 key file) with, per server, the client
//     registration, the token and any pending authorization, bound to the
//     server URL and issuer they were obtained for. Changes are
//     made under a file lock, so concurrent processes never lose a rotated
//     refresh token.
//   - [TokenSource]: a server's access token, refreshed before expiry,
//     once per server across goroutines and processes, within its own
//     time bound. A refused refresh token means [ErrLoginRequired].
//   - [Handler]: an auth.OAuthHandler for go-sdk's Streamable HTTP
//     transport. It runs go-sdk's authorization code flow (discovery,
//     PKCE, resource indicators, registration, step-up, iss check) with
//     the registration and tokens persisted; interactively with a
//     [Fetcher] such as [Loopback], deferred to the application with
//     [PendingError] and [Handler.FinishAuth], or not at all. A client
//     metadata URL ([HandlerConfig.ClientMetadataURL],
//     [ClientMetadataDocument]) is the client ID where the authorization
//     server supports Client ID Metadata Documents.
//   - [ClientCredentialsHandler]: the client_credentials grant for
//     machine-to-machine access, the secret read from the environment at
//     use; or, with an [IdPConfig], enterprise-managed authorization (an
//     ID-JAG from the IdP by token exchange, presented with the JWT bearer
//     grant).
//   - [ClientKey]: private_key_jwt client authentication (RFC 7523) instead
//     of a secret, for both handlers.
//   - [Revoke]: RFC 7009 revocation of a stored entry's tokens, for logout.
//   - [Callers]: per-caller upstream credentials for a gateway, so that an
//     upstream server is reached with the identity of the gateway's caller
//     and never with the caller's own token: by token exchange (RFC 8693,
//     the result kept in memory per caller) or by a login per caller
//     through the gateway's [Callback], the tokens kept in the Store per
//     caller, bound to the caller, the server's URL and the issuer.
//     [Callers.Handler] is one caller's auth.OAuthHandler; without a token
//     its requests fail with a *[CallerLoginError] carrying the URL.
//
// Every request goes through the caller's *http.Client, which should be
// netpolicy's; and every URL an authorization server names is checked
// with netpolicy.CheckURL before it is used.
//
// A sketch of a CLI login followed, in another process, by a
// non-interactive connect:
//
//	store, err := oauth.NewStore("", nil) // ~/.config/toolwire/oauth.json
//	...
//	h, err := oauth.NewHandler(&oauth.HandlerConfig{
//		Server:     "github",
//		Resource:   "https://mcp.example.com/mcp",
//		Store:      store,
//		HTTPClient: netpolicy.NewClient(nil),
//		Fetcher:    &oauth.Loopback{Open: openBrowser},
//	})
//	err = h.Login(ctx, "https://mcp.example.com/mcp")
//
//	// later, `toolwire tools`: no Fetcher, so no prompt
//	h, err = oauth.NewHandler(&oauth.HandlerConfig{Server: "github", Resource: url, Store: store, HTTPClient: hc})
//	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, OAuthHandler: h}
//	session, err := client.Connect(ctx, t, nil)
//	if errors.Is(err, oauth.ErrLoginRequired) { ... tell the user ... }
//
// A gateway's callers, each reaching the upstream as themselves:
//
//	callers, err := oauth.NewCallers(&oauth.CallersConfig{Server: "tracker", Resource: url, Mode: oauth.CallerLogin,
//		HTTPClient: hc, Store: store, RedirectURL: "https://gw.example.com/oauth/callback"})
//	cb, err := oauth.NewCallback(nil, callers) // mounted at /oauth/callback
//	...
//	h := callers.Handler(oauth.Caller{Issuer: iss, Subject: sub}) // the caller's session's handler
//	_, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, OAuthHandler: h}, nil)
//	var le *oauth.CallerLoginError
//	if errors.As(err, &le) { ... a URL-mode elicitation of le.URL ... }
//
// No error or log line of this package contains a token, a client secret
// or a PKCE verifier; Entry, Token, Client and SubjectToken print without
// them.
package oauth
