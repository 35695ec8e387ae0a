-- A/B experiments across hosts: each enrolled session's assignment, one
-- row per ended turn and the feedback posted later, as one host keeps
-- them in SQLite (ab_assignments, ab_turns, ab_feedback), so `GET /v1/ab`
-- on any host reports every host's sessions. Variants themselves are a
-- pure function of the stickiness key, recorded in the shared log.
CREATE TABLE agentkit_ab_assignments (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    experiment TEXT NOT NULL,
    variant TEXT,
    principal_id TEXT NOT NULL,
    purpose TEXT,
    assigned_at_ms BIGINT NOT NULL,
    PRIMARY KEY (agent, session_id, experiment)
);
CREATE INDEX agentkit_ab_assignments_by_variant ON agentkit_ab_assignments (agent, experiment, variant);
CREATE TABLE agentkit_ab_turns (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    latency_ms BIGINT NOT NULL,
    tool_calls BIGINT NOT NULL,
    tool_errors BIGINT NOT NULL,
    ended_at_ms BIGINT NOT NULL,
    PRIMARY KEY (agent, session_id, turn_id)
);
CREATE TABLE agentkit_ab_feedback (
    id BIGSERIAL PRIMARY KEY,
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    score DOUBLE PRECISION NOT NULL,
    label TEXT,
    note TEXT,
    principal_id TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX agentkit_ab_feedback_by_session ON agentkit_ab_feedback (agent, session_id);
