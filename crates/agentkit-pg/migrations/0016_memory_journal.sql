-- The agent's journal (`[memory] journal = true`), shared by its hosts:
-- one line per settled turn, in the order appended (`seq`); the oldest
-- are let go past a byte budget.
CREATE TABLE agentkit_memory_journal (
    agent TEXT NOT NULL,
    seq BIGSERIAL,
    line TEXT NOT NULL,
    PRIMARY KEY (agent, seq)
);
