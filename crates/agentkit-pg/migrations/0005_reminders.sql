-- Reminders shared by hosts: any host claims a due one with
-- FOR UPDATE SKIP LOCKED and a claim expiry (a claim whose host died is
-- claimed again once it expires), fires it, and writes it back.
CREATE TABLE agentkit_reminders (
    agent TEXT NOT NULL,
    id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    continuation_token TEXT NOT NULL,
    session_id TEXT,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    prompt TEXT,
    until_condition TEXT,
    status TEXT NOT NULL,
    reason TEXT,
    next_fire_at_ms BIGINT,
    fire_count BIGINT NOT NULL DEFAULT 0,
    created_at_ms BIGINT NOT NULL,
    last_fired_at_ms BIGINT,
    claimed_by TEXT,
    claimed_until TIMESTAMPTZ,
    PRIMARY KEY (agent, id)
);
CREATE INDEX agentkit_reminders_due ON agentkit_reminders (agent, next_fire_at_ms) WHERE status = 'armed';
