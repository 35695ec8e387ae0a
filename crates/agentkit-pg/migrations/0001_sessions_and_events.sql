-- The session index, the event logs and their append counters.
CREATE TABLE agentkit_sessions (
    agent TEXT NOT NULL,
    id TEXT NOT NULL,
    channel TEXT NOT NULL,
    continuation TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    parked BOOLEAN NOT NULL DEFAULT FALSE,
    meta TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, id)
);
CREATE INDEX agentkit_sessions_by_key ON agentkit_sessions (agent, channel, continuation);
CREATE INDEX agentkit_sessions_by_owner ON agentkit_sessions (agent, principal_id, id);
CREATE INDEX agentkit_sessions_parked ON agentkit_sessions (agent) WHERE parked;

-- One row per log: `len` is the next index, taken under the row's lock by
-- every append (so indices are contiguous whichever host appends).
CREATE TABLE agentkit_logs (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    len BIGINT NOT NULL,
    PRIMARY KEY (agent, session_id)
);

-- The events. `data` is the payload as the file backend stores it (a
-- `message.appended` keeps only its `delta`).
CREATE TABLE agentkit_events (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    idx BIGINT NOT NULL CHECK (idx >= 0),
    type TEXT NOT NULL,
    turn_id TEXT,
    at TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (agent, session_id, idx)
);
