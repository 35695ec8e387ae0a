-- One writer per session: the host holding a session's lease is the only
-- one that appends to its log. `token` grows on every change of owner and
-- is checked by every append (fencing): a host that lost the lease can
-- never append again, even if it has not noticed yet.
CREATE TABLE agentkit_leases (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    token BIGINT NOT NULL,
    -- FALSE once the owner let the session go (it settled): nothing to
    -- recover. An expired lease still held is a dead host's.
    held BOOLEAN NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (agent, session_id)
);
CREATE INDEX agentkit_leases_by_owner ON agentkit_leases (owner) WHERE held;
CREATE INDEX agentkit_leases_expiring ON agentkit_leases (agent, expires_at) WHERE held;
