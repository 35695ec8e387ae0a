-- The session's last activity (RFC 3339, UTC, milliseconds, as the
-- metadata's `createdAt`): when its index row was last written (created,
-- a turn's end, an approval parked or decided, a rotated token). Rows
-- written before it start at their creation.
ALTER TABLE agentkit_sessions ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
UPDATE agentkit_sessions SET updated_at = COALESCE(meta::jsonb ->> 'createdAt', '');
CREATE INDEX agentkit_sessions_by_update ON agentkit_sessions (agent, updated_at);
