-- Who follows an A2A task for its push notifications: one host at a time
-- (the row's `holder`, renewed while it follows), and how far the task's
-- changes were pushed (`pushed_through`: the log index after the last
-- event pushed). A row whose holder died (expired, or its liveness lock
-- is free) is claimed by another host, which pushes from there on: each
-- change is delivered once.
CREATE TABLE agentkit_a2a_push_follows (
    agent TEXT NOT NULL,
    task_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    pushed_through BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (agent, task_id)
);
CREATE INDEX agentkit_a2a_push_follows_expiring ON agentkit_a2a_push_follows (agent, expires_at);
