-- An instance's claim is its advisory lock; these say, by the database's
-- clock, when it was last confirmed (seen_at: the instance's listening
-- connection writes it every few seconds while it holds the lock) and
-- since when the instance has held it without a break (claimed_at: set
-- when it takes the lock again after a reconnection). Another instance is
-- taken for lost only when its lock is free and it was not seen for a
-- grace period, and only by a replica whose own claim is older than that
-- grace: a replica that is merely reconnecting (after an outage of the
-- database, say) is never recovered.
ALTER TABLE toolwire.instances
	ADD COLUMN seen_at    timestamptz NOT NULL DEFAULT now(),
	ADD COLUMN claimed_at timestamptz NOT NULL DEFAULT now();
