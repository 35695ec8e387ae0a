-- Requests for a session another host runs (a follow-up, a stop, an
-- approval decision): the host that received one records it here and
-- NOTIFYs; the host holding the session's lease (or, when none does, any
-- host) claims it (state pending -> claimed, under FOR UPDATE SKIP LOCKED),
-- applies it as a local request and writes the outcome back (-> done),
-- which the receiving host answers its caller with. A row no host claimed
-- in time is abandoned by its receiver and never applied.
CREATE TABLE agentkit_mailbox (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload JSONB NOT NULL,
    principal_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    claimed_by TEXT,
    outcome JSONB,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    claimed_at TIMESTAMPTZ,
    done_at TIMESTAMPTZ
);
CREATE INDEX agentkit_mailbox_pending ON agentkit_mailbox (agent, seq) WHERE state = 'pending';
