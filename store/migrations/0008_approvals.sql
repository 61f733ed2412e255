-- Lasting approvals and denials a person gave (package approval's Grant):
-- a call whose key matches one that has not expired runs (or, for a
-- denial, is refused) without anyone being asked. Times are the
-- database's.
CREATE TABLE toolwire.approvals (
	id         text        PRIMARY KEY,
	scope      text        NOT NULL CHECK (scope IN ('args', 'tool', 'session')),
	caller     text        NOT NULL,
	tool       text        NOT NULL,
	definition text        NOT NULL,
	args_hash  text        NOT NULL,
	policy     text        NOT NULL,
	session    text        NOT NULL DEFAULT '',
	deny       boolean     NOT NULL DEFAULT false,
	reason     text        NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX approvals_key ON toolwire.approvals (caller, tool, definition, policy);
CREATE INDEX approvals_session ON toolwire.approvals (session) WHERE session <> '';

-- Calls waiting for an operator's decision (package approval's Request):
-- body is the request as JSON text (its arguments byte for byte, as the
-- operator is shown them); state, decision and the times are the columns
-- a decision changes, in one row lock. A change is announced on
-- toolwire_approvals with the request's id.
CREATE TABLE toolwire.approval_requests (
	id         text        PRIMARY KEY,
	body       text        NOT NULL,
	state      text        NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'withdrawn')),
	decision   text,
	created_at timestamptz NOT NULL,
	deadline   timestamptz NOT NULL,
	closed_at  timestamptz
);
CREATE INDEX approval_requests_waiting ON toolwire.approval_requests (created_at) WHERE state = 'pending';
