-- A message is sent only to an instance that is running (the statement
-- checks), and what could still be left for one that is gone (it ended or
-- was recovered after the message was written) is removed by the running
-- instances, as is any message older than the bound a message may wait:
-- sent_at, by the database's clock, says how long it has.
ALTER TABLE toolwire.mailbox ADD COLUMN sent_at timestamptz NOT NULL DEFAULT now();
