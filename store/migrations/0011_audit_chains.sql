-- The audit log as one hash chain per instance instead of one for the
-- fleet: each process appends to its own chain (chain = its id in
-- toolwire.instances), with its own head row, so that the appends of
-- several replicas no longer queue on one row lock. The rows of the one
-- chain kept so far become chain 0, its head chain 0's head. seq stays
-- the fleet-wide order of the rows (from a sequence: it may have gaps
-- now); chain_seq is a row's place in its chain, from 1, without gaps.
ALTER TABLE toolwire.audit_events
	ADD COLUMN chain     integer NOT NULL DEFAULT 0,
	ADD COLUMN chain_seq bigint;
UPDATE toolwire.audit_events SET chain_seq = seq;
ALTER TABLE toolwire.audit_events
	ALTER COLUMN chain_seq SET NOT NULL,
	ALTER COLUMN chain DROP DEFAULT;
CREATE UNIQUE INDEX audit_events_chain ON toolwire.audit_events (chain, chain_seq);

CREATE SEQUENCE toolwire.audit_events_seq OWNED BY toolwire.audit_events.seq;
SELECT setval('toolwire.audit_events_seq', greatest(1, (SELECT seq FROM toolwire.audit_head)), (SELECT seq FROM toolwire.audit_head) > 0);
ALTER TABLE toolwire.audit_events ALTER COLUMN seq SET DEFAULT nextval('toolwire.audit_events_seq');

-- Each chain's head: its last row's chain_seq and the SHA-256 of its
-- line. A verifier compares every chain's end with its head.
CREATE TABLE toolwire.audit_chains (
	chain integer PRIMARY KEY,
	seq   bigint  NOT NULL,
	hash  bytea   NOT NULL CHECK (length(hash) = 32)
);
INSERT INTO toolwire.audit_chains (chain, seq, hash) SELECT 0, seq, hash FROM toolwire.audit_head WHERE seq > 0;

-- Appends lines (in order) to chain c when its head is still at expected
-- (the first line names the head's hash as its "prev", each next line
-- the one before it), moving the head to the last of them (whose hash is
-- last_hash); returns the head as it is now. A chain is written by its
-- own instance only, so the head's lock is never waited for, and a
-- writer finds the head elsewhere only after a write whose outcome it
-- could not know (it then builds its lines again).
--
-- A call has one outcome, the first recorded (0008's rule, now across
-- chains): a replica taken for lost may still end a call that the
-- replica recovering it has recorded as lost, each in its own chain. The
-- calls of the lines whose kind is one of outcome_kinds are locked
-- (an advisory lock per call, in one order, held to the end of the
-- transaction), then looked up in a statement of their own, which sees
-- every outcome committed before the lock was granted. When a call has
-- one already, nothing is appended, and taken lists those lines (their
-- ordinals, from 1): the writer leaves them out and appends the rest.
CREATE FUNCTION toolwire.audit_append_chain(c integer, expected bigint, lines bytea[], last_hash bytea, kinds text[],
	ats timestamptz[], instances integer[], batches text[], idxs integer[], outcome_kinds text[],
	OUT appended boolean, OUT taken integer[], OUT head_seq bigint, OUT head_hash bytea)
LANGUAGE plpgsql AS $$
DECLARE
	k record;
BEGIN
	taken := '{}';
	SELECT h.seq, h.hash INTO head_seq, head_hash FROM toolwire.audit_chains h WHERE h.chain = c FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO toolwire.audit_chains (chain, seq, hash) VALUES (c, 0, decode(repeat('00', 32), 'hex'))
			ON CONFLICT (chain) DO NOTHING;
		SELECT h.seq, h.hash INTO head_seq, head_hash FROM toolwire.audit_chains h WHERE h.chain = c FOR UPDATE;
	END IF;
	appended := head_seq = expected;
	IF NOT appended THEN
		RETURN;
	END IF;
	FOR k IN SELECT DISTINCT u.inst, u.batch, u.idx
		FROM unnest(kinds, instances, batches, idxs) AS u(kind, inst, batch, idx)
		WHERE u.batch IS NOT NULL AND u.kind = ANY (outcome_kinds)
		ORDER BY 1, 2, 3
	LOOP
		PERFORM pg_advisory_xact_lock(1953955843, hashtext(k.inst || '/' || k.batch || '/' || k.idx)); -- 0x74770003
	END LOOP;
	SELECT coalesce(array_agg(u.n::integer ORDER BY u.n), '{}') INTO taken
		FROM unnest(kinds, instances, batches, idxs) WITH ORDINALITY AS u(kind, inst, batch, idx, n)
		WHERE u.batch IS NOT NULL AND u.kind = ANY (outcome_kinds)
			AND EXISTS (SELECT 1 FROM toolwire.audit_events e
				WHERE e.instance = u.inst AND e.batch = u.batch AND e.idx = u.idx AND e.kind = ANY (outcome_kinds));
	IF cardinality(taken) > 0 THEN
		appended := false;
		RETURN;
	END IF;
	INSERT INTO toolwire.audit_events (seq, chain, chain_seq, line, kind, at, instance, batch, idx)
		SELECT nextval('toolwire.audit_events_seq'), c, expected + u.n, u.line, u.kind, u.at, u.inst, u.batch, u.idx
		FROM unnest(lines, kinds, ats, instances, batches, idxs) WITH ORDINALITY AS u(line, kind, at, inst, batch, idx, n)
		ORDER BY u.n;
	head_seq := expected + cardinality(lines);
	head_hash := last_hash;
	UPDATE toolwire.audit_chains SET seq = head_seq, hash = head_hash WHERE chain = c;
END
$$;

-- 0008's outcome append, on the one chain, is replaced by the above.
DROP FUNCTION toolwire.audit_append_outcome(bigint, bytea, bytea, text, timestamptz, integer, text, integer, text[]);

-- The function of one chain for the fleet, kept for a replica of the
-- toolwire before this one during a rolling update: it appends to chain
-- 0, the chain it knew, whose head is now in audit_chains.
DROP FUNCTION toolwire.audit_append(bigint, bytea, bytea, text, timestamptz, integer, text, integer);
CREATE FUNCTION toolwire.audit_append(expected bigint, line bytea, line_hash bytea, kind text, at timestamptz,
	instance integer, batch text, idx integer, OUT appended boolean, OUT head_seq bigint, OUT head_hash bytea)
LANGUAGE sql AS $$
	SELECT a.appended, a.head_seq, a.head_hash FROM toolwire.audit_append_chain(0, expected, ARRAY[line], line_hash, ARRAY[kind], ARRAY[at],
		ARRAY[instance], ARRAY[batch], ARRAY[idx], '{}') a
$$;
-- Its head as it read it.
DROP TABLE toolwire.audit_head;
CREATE VIEW toolwire.audit_head AS
	SELECT coalesce(h.seq, 0) AS seq, coalesce(h.hash, decode(repeat('00', 32), 'hex')) AS hash
	FROM (SELECT 1) AS one LEFT JOIN toolwire.audit_chains h ON h.chain = 0;

-- The view shows each row's chain beside the instance it belongs to.
CREATE OR REPLACE VIEW toolwire.audit AS
	SELECT seq, convert_from(line, 'UTF8')::jsonb AS event, instance, chain, chain_seq FROM toolwire.audit_events;

-- Takes one token from each of several callers' buckets, in one
-- statement, as the replica's rate checks that came at the same time:
-- answer n is the check of callers[n]. The buckets are taken in the
-- order of their callers (a caller's checks in the order given), so that
-- two replicas' statements lock rows in one order and never deadlock.
-- Each check is the single check's statement, with the transaction's
-- time (now()) for all of them: none is credited refill past its start.
CREATE FUNCTION toolwire.take_tokens(callers text[], rates double precision[], bursts double precision[])
RETURNS boolean[] LANGUAGE plpgsql AS $$
DECLARE
	out boolean[] := array_fill(false, ARRAY[cardinality(callers)]);
	r record;
	ok boolean;
BEGIN
	FOR r IN SELECT u.caller, u.rate, u.burst, u.n FROM unnest(callers, rates, bursts) WITH ORDINALITY AS u(caller, rate, burst, n)
		ORDER BY u.caller, u.n
	LOOP
		INSERT INTO toolwire.rate_buckets AS b (caller, tokens, updated, allowed)
		VALUES (r.caller, r.burst - 1, now(), true)
		ON CONFLICT (caller) DO UPDATE SET
			tokens = CASE WHEN toolwire.bucket_level(b.tokens, b.updated, r.rate, r.burst) >= 1
				THEN toolwire.bucket_level(b.tokens, b.updated, r.rate, r.burst) - 1
				ELSE toolwire.bucket_level(b.tokens, b.updated, r.rate, r.burst) END,
			allowed = toolwire.bucket_level(b.tokens, b.updated, r.rate, r.burst) >= 1,
			updated = greatest(b.updated, now())
		RETURNING b.allowed INTO ok;
		out[r.n] := ok;
	END LOOP;
	RETURN out;
END
$$;
