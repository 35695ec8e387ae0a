-- The key-value store of the host bridge, per agent, shared by hosts.
CREATE TABLE agentkit_kv (
    agent TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (agent, key)
);
CREATE INDEX agentkit_kv_expiring ON agentkit_kv (agent, expires_at) WHERE expires_at IS NOT NULL;
