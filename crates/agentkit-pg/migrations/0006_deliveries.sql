-- Channel deliveries acted on, by id: a delivery sent to two hosts runs
-- once (the host whose insert makes the row).
CREATE TABLE agentkit_deliveries (
    agent TEXT NOT NULL,
    channel TEXT NOT NULL,
    pack TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    seen_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, channel, pack, delivery_id)
);
-- One session per channel key (channels other than HTTP, whose rotating
-- tokens are unique anyway): two hosts taking a new key's first message
-- at once make one session, the other continues it.
CREATE UNIQUE INDEX agentkit_sessions_one_per_key ON agentkit_sessions (agent, channel, continuation)
    WHERE channel <> 'http';
-- Channels' per-session state (a webhook channel's `state`, a pack's
-- banner comment id), read and replaced by whichever host handles a
-- delivery.
CREATE TABLE agentkit_channel_state (
    agent TEXT NOT NULL,
    channel TEXT NOT NULL,
    session_id TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (agent, channel, session_id)
);
