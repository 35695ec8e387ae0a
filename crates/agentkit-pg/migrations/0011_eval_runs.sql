-- Eval runs started through the dev routes (`POST /v1/dev/evals`), shared
-- by hosts: a run started on one host is listed and shown on every host.
CREATE TABLE agentkit_eval_runs (
    agent TEXT NOT NULL,
    run_id TEXT NOT NULL,
    started_at TEXT NOT NULL,
    -- The host running it (`Leases::owner_name`), for operators.
    host TEXT NOT NULL,
    -- JSON text, as every table here keeps JSON.
    selectors TEXT NOT NULL,
    tags TEXT NOT NULL,
    -- NULL while the run is going.
    report TEXT,
    PRIMARY KEY (agent, run_id)
);
CREATE INDEX agentkit_eval_runs_by_start ON agentkit_eval_runs (agent, started_at);
