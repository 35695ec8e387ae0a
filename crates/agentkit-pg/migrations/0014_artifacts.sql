-- The agent's artifacts: records its sessions keep beyond their logs
-- (`artifacts.toml`). `data` is JSON text; `principal_id` is the owner of
-- the session that tagged it last (who may list it). A kind and key name
-- one artifact: tagging them again updates it.
CREATE TABLE agentkit_artifacts (
    agent TEXT NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT,
    data TEXT NOT NULL,
    session_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    turn_id TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (agent, id)
);
CREATE UNIQUE INDEX agentkit_artifacts_by_key ON agentkit_artifacts (agent, kind, key) WHERE key IS NOT NULL;
CREATE INDEX agentkit_artifacts_by_session ON agentkit_artifacts (agent, session_id, id);
CREATE INDEX agentkit_artifacts_by_principal ON agentkit_artifacts (agent, principal_id, id);
CREATE INDEX agentkit_artifacts_by_update ON agentkit_artifacts (agent, updated_at_ms);
