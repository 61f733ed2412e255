-- A call has one outcome: the first recorded. A replica whose claim went
-- down may be taken for lost by another, which gives its open calls the
-- outcome call.errored (instance_lost); the replica itself may still end
-- one of those calls and record how. Whichever comes second is not
-- appended.
--
-- Appends an outcome of the call (call_instance, call_batch, call_idx) as
-- toolwire.audit_append does, unless the call has one of outcome_kinds
-- already (taken). The head's row lock is taken first, and the check runs
-- after it, in a statement of its own (a fresh snapshot: every append
-- committed before the lock was granted is seen), so two outcomes of one
-- call, written at once by two replicas, are ordered and the second finds
-- the first.
CREATE FUNCTION toolwire.audit_append_outcome(expected bigint, line bytea, line_hash bytea, kind text, at timestamptz,
	call_instance integer, call_batch text, call_idx integer, outcome_kinds text[],
	OUT appended boolean, OUT taken boolean, OUT head_seq bigint, OUT head_hash bytea)
LANGUAGE plpgsql AS $$
BEGIN
	SELECT h.seq, h.hash INTO head_seq, head_hash FROM toolwire.audit_head h FOR UPDATE;
	taken := EXISTS (SELECT 1 FROM toolwire.audit_events e
		WHERE e.instance = call_instance AND e.batch = call_batch AND e.idx = call_idx AND e.kind = ANY (outcome_kinds));
	IF taken THEN
		appended := false;
		RETURN;
	END IF;
	SELECT a.appended, a.head_seq, a.head_hash INTO appended, head_seq, head_hash
		FROM toolwire.audit_append(expected, line, line_hash, kind, at, call_instance, call_batch, call_idx) a;
END
$$;
