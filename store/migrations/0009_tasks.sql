-- Tasks: tool calls a gateway runs in the background for a client, which
-- polls them from any replica (package task). One row per task; owner is
-- the caller as the gateway keys callers. instance is the replica that
-- runs the call (or polls its upstream): when it is lost, a plain call's
-- task is ended failed by the next reader, and a task its upstream runs
-- (upstream_task) is adopted by another replica. No foreign key: the
-- instances' rows are deleted a week after they end, and a task outlives
-- nothing by then.
CREATE TABLE toolwire.tasks (
	id            text             PRIMARY KEY,
	owner         text             NOT NULL,
	tool          text             NOT NULL,
	status        text             NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
	message       text             NOT NULL DEFAULT '',
	progress      double precision NOT NULL DEFAULT 0,
	total         double precision NOT NULL DEFAULT 0,
	result        bytea,
	error         bytea,
	created_at    timestamptz      NOT NULL,
	updated_at    timestamptz      NOT NULL,
	ttl_ms        bigint           NOT NULL,
	expires_at    timestamptz      NOT NULL,
	instance      text             NOT NULL,
	server        text             NOT NULL DEFAULT '',
	upstream_task text             NOT NULL DEFAULT ''
);
CREATE INDEX tasks_owner ON toolwire.tasks (owner, created_at, id);
CREATE INDEX tasks_expires ON toolwire.tasks (expires_at);
