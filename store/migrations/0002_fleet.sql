-- What the replicas of a fleet need of one another while they serve: who
-- is running (instances), where a parked 2026-07-28 call or an approval
-- page is held, the messages they send one another, the key that seals
-- requestState, and, on the audit table, which instance wrote each row
-- and which call it belongs to, so that the calls of an instance that was
-- lost can be given their outcome.

-- Every process that opened the store: a gateway replica, or a command.
-- While it runs it holds the session-level advisory lock
-- (instance_lock_class, id) on its listening connection; a lock that can
-- be taken is an instance that is gone. ended_at: it closed the store
-- itself; recovered_at: another instance found it lost and gave its open
-- calls their outcome.
CREATE TABLE toolwire.instances (
	id           serial      PRIMARY KEY,
	host         text        NOT NULL DEFAULT '',
	pid          integer     NOT NULL DEFAULT 0,
	started_at   timestamptz NOT NULL DEFAULT now(),
	ended_at     timestamptz,
	recovered_at timestamptz
);

-- Not covered by the chain, as kind and at are not: the instance a row
-- belongs to (the one that wrote it; for an outcome recovery gave a lost
-- instance's call, the lost one) and the call it is about, for the
-- recovery of a lost instance's open calls.
ALTER TABLE toolwire.audit_events
	ADD COLUMN instance integer,
	ADD COLUMN batch    text,
	ADD COLUMN idx      integer;
-- A lost instance's calls: its rows of calls, and the outcomes recovery
-- gives them (written under the lost instance's id).
CREATE INDEX audit_events_instance_call ON toolwire.audit_events (instance, batch, idx) WHERE batch IS NOT NULL;

-- Appends one line to the chain when the head is still at expected (the
-- line names the head's hash as its "prev"), and returns the head as it
-- is now: a writer that another replica beat learns the new head in the
-- same round trip, and builds its line again. The head's row lock, taken
-- first, orders the fleet's appends.
CREATE FUNCTION toolwire.audit_append(expected bigint, line bytea, line_hash bytea, kind text, at timestamptz,
	instance integer, batch text, idx integer, OUT appended boolean, OUT head_seq bigint, OUT head_hash bytea)
LANGUAGE plpgsql AS $$
BEGIN
	SELECT h.seq, h.hash INTO head_seq, head_hash FROM toolwire.audit_head h FOR UPDATE;
	appended := head_seq = expected;
	IF appended THEN
		head_seq := expected + 1;
		head_hash := line_hash;
		UPDATE toolwire.audit_head SET seq = head_seq, hash = head_hash;
		INSERT INTO toolwire.audit_events (seq, line, kind, at, instance, batch, idx)
			VALUES (head_seq, line, kind, at, instance, batch, idx);
	END IF;
END
$$;

-- A session's revision grows with each change of what it is (put, update),
-- so that a replica holding a copy knows when to read it again.
ALTER TABLE toolwire.sessions ADD COLUMN revision bigint NOT NULL DEFAULT 1;

-- What an instance holds that another may be asked about, by kind and
-- key: a parked 2026-07-28 call that asked its client something ("call",
-- its id: only then can a retry land elsewhere), an approval page of
-- URL-mode elicitation ("page", the SHA-256 of its token; the token
-- itself is known only to the client asked). A request about it that
-- reaches another replica is passed to the holder.
CREATE TABLE toolwire.held (
	kind       text        NOT NULL,
	key        text        NOT NULL,
	instance   integer     NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (kind, key)
);
CREATE INDEX held_instance ON toolwire.held (instance);

-- Messages from one instance to another (a retry passed to the holder of
-- its call, the holder's notes and answer back). A NOTIFY on
-- toolwire_fleet names the recipient; the recipient takes its rows, so a
-- notification lost while its listener reconnected loses no message.
-- Unlogged: after a database crash, what was in flight is lost with the
-- connections that carried it.
CREATE UNLOGGED TABLE toolwire.mailbox (
	seq       bigserial PRIMARY KEY,
	recipient integer   NOT NULL,
	body      bytea     NOT NULL
);
CREATE INDEX mailbox_recipient ON toolwire.mailbox (recipient, seq);

-- Keys the fleet shares, made by the first instance that needs one:
-- 'request_state' seals the requestState of multi round-trip requests.
CREATE TABLE toolwire.fleet_keys (
	name text  PRIMARY KEY,
	key  bytea NOT NULL CHECK (length(key) >= 32)
);
