-- The first schema of toolwire's store: everything the replicas of a fleet
-- must agree on. Applied once, in one transaction, by store.Open (see
-- migrate.go); the schema "toolwire" and toolwire.schema_migrations exist
-- before it runs.

-- Tool pins: one row per pinned tool of a scope (server name and identity;
-- identity '' is a pin by name only, as version 1 pins files kept them).
-- The hashes are "sha256:<hex>", as in the pins file.
CREATE TABLE toolwire.pins (
	server            text        NOT NULL,
	identity          text        NOT NULL DEFAULT '',
	tool              text        NOT NULL,
	fingerprint       text        NOT NULL,
	name_hash         text        NOT NULL,
	description_hash  text        NOT NULL,
	input_schema_hash text        NOT NULL,
	annotations_hash  text        NOT NULL,
	approved_at       timestamptz NOT NULL,
	first_use         boolean     NOT NULL DEFAULT false,
	snippet           text        NOT NULL DEFAULT '', -- the server's words: untrusted
	registered        text        NOT NULL DEFAULT '',
	PRIMARY KEY (server, identity, tool)
);

-- Tools a warn-mode check reported as new, with the fingerprint reported,
-- so that each is reported once. Kept only for scopes that have pins.
CREATE TABLE toolwire.pins_noticed (
	server      text NOT NULL,
	identity    text NOT NULL DEFAULT '',
	tool        text NOT NULL,
	fingerprint text NOT NULL,
	PRIMARY KEY (server, identity, tool)
);

-- OAuth state: one sealed record per server, the oauth store file's
-- format (AES-256-GCM; the key from TOOLWIRE_PASSPHRASE through Argon2id,
-- or from the key file). No token is ever in plaintext here.
CREATE TABLE toolwire.oauth_tokens (
	server     text        PRIMARY KEY,
	record     bytea       NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);

-- The audit log of the whole fleet, one hash chain: line is the event
-- exactly as hashed and signed (JSON with "prev", and "sig" when signed);
-- kind and at repeat two of its fields for queries and are not covered by
-- the chain. seq has no gaps: a missing row breaks the chain.
CREATE TABLE toolwire.audit_events (
	seq        bigint      PRIMARY KEY,
	line       bytea       NOT NULL,
	kind       text        NOT NULL,
	at         timestamptz NOT NULL,
	written_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_at ON toolwire.audit_events (at);

-- The chain's head: the last row's seq and the SHA-256 of its line. Every
-- append updates it in the same statement, which serializes appends
-- across the fleet; a verifier compares it with the table's end.
CREATE TABLE toolwire.audit_head (
	one  boolean PRIMARY KEY DEFAULT true CHECK (one),
	seq  bigint  NOT NULL,
	hash bytea   NOT NULL CHECK (length(hash) = 32)
);
INSERT INTO toolwire.audit_head (seq, hash) VALUES (0, decode(repeat('00', 32), 'hex'));

-- The events as JSON, for people and queries.
CREATE VIEW toolwire.audit AS
	SELECT seq, convert_from(line, 'UTF8')::jsonb AS event FROM toolwire.audit_events;

-- Per-caller token buckets for the call rate, shared by the fleet.
-- Unlogged: a bucket is worth nothing after a crash (it starts full
-- again), and the writes skip the WAL.
CREATE UNLOGGED TABLE toolwire.rate_buckets (
	caller  text             PRIMARY KEY,
	tokens  double precision NOT NULL,
	updated timestamptz      NOT NULL,
	allowed boolean          NOT NULL -- whether the last request took a token
);

-- The level a bucket holding tokens at updated has refilled to by now, at
-- rate tokens per second, up to burst.
CREATE FUNCTION toolwire.bucket_level(tokens double precision, updated timestamptz, rate double precision, burst double precision)
	RETURNS double precision LANGUAGE sql STABLE
	AS $$ SELECT least(burst, tokens + rate * greatest(0, extract(epoch FROM now() - updated)::double precision)) $$;

-- MCP sessions of the 2025 protocol revisions, so that any replica serves
-- any session's requests. expires_at NULL: no idle expiry.
CREATE TABLE toolwire.sessions (
	id            text        PRIMARY KEY,
	caller        text        NOT NULL,
	subject       text        NOT NULL DEFAULT '',
	credential    text        NOT NULL DEFAULT '',
	role          text        NOT NULL DEFAULT '',
	protocol      text        NOT NULL,
	capabilities  jsonb,
	client_info   jsonb,
	log_level     text        NOT NULL DEFAULT '',
	subscriptions text[]      NOT NULL DEFAULT '{}',
	created_at    timestamptz NOT NULL,
	last_seen     timestamptz NOT NULL,
	expires_at    timestamptz
);
CREATE INDEX sessions_expires_at ON toolwire.sessions (expires_at);
