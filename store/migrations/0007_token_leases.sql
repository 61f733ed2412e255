-- Who may change a server's OAuth record now (a token refresh, with its
-- request to the authorization server): a lease until expires_at, by the
-- database's clock, held without holding a connection or a transaction.
-- Unlogged: after a crash of the database every lease is gone, as if it
-- had expired.
CREATE UNLOGGED TABLE toolwire.token_leases (
	server     text        PRIMARY KEY,
	holder     text        NOT NULL,
	expires_at timestamptz NOT NULL
);
