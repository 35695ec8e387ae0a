-- The agent's governed memories (`remember` / `recall` / `forget`): a
-- short text, its scope (`principal`: only `principal_id`'s sessions see
-- it; `agent`: every session does) and where it was remembered.
CREATE TABLE agentkit_memories (
    agent TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    scope TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id TEXT,
    event_index BIGINT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (agent, id)
);
CREATE INDEX agentkit_memories_by_principal ON agentkit_memories (agent, principal_id, id);
CREATE INDEX agentkit_memories_by_scope ON agentkit_memories (agent, scope, id);
