-- Cron once per tick across hosts: the host whose insert creates a
-- (schedule, tick) row fires it; every other host finds it taken.
CREATE TABLE agentkit_schedule_ticks (
    agent TEXT NOT NULL,
    schedule_id TEXT NOT NULL,
    tick_ms BIGINT NOT NULL,
    fired_by TEXT NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, schedule_id, tick_ms)
);
