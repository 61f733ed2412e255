-- audit_append_chain as in 0011, but each call an outcome is for is looked
-- up on its own, by its key, under its lock, instead of the lines' keys at
-- once in one set query. The set query's plan is made once per database
-- connection, while the table is small (a scan of all of it is cheapest
-- then), and kept as the table grows: in a benchmark of 6,000 calls it
-- took 1.2 ms an append, two thirds of the function's time, and more the
-- longer a replica ran. A lookup by one key can only be planned as a probe
-- of audit_events_instance_call, however large the table is.
CREATE OR REPLACE FUNCTION toolwire.audit_append_chain(c integer, expected bigint, lines bytea[], last_hash bytea, kinds text[],
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
	-- Each call's lock, in one order, then its lookup: the lookup sees
	-- every outcome committed before the lock was granted.
	FOR k IN SELECT u.inst, u.batch, u.idx, array_agg(u.n::integer) AS ns
		FROM unnest(kinds, instances, batches, idxs) WITH ORDINALITY AS u(kind, inst, batch, idx, n)
		WHERE u.batch IS NOT NULL AND u.kind = ANY (outcome_kinds)
		GROUP BY 1, 2, 3
		ORDER BY 1, 2, 3
	LOOP
		PERFORM pg_advisory_xact_lock(1953955843, hashtext(k.inst || '/' || k.batch || '/' || k.idx)); -- 0x74770003
		IF EXISTS (SELECT 1 FROM toolwire.audit_events e
				WHERE e.instance = k.inst AND e.batch = k.batch AND e.idx = k.idx AND e.kind = ANY (outcome_kinds)) THEN
			taken := taken || k.ns;
		END IF;
	END LOOP;
	IF cardinality(taken) > 0 THEN
		SELECT array_agg(t ORDER BY t) INTO taken FROM unnest(taken) AS t;
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
