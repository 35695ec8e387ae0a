-- Daily money budgets (`[harness.budget] max_cost_usd_per_day`) count
-- every host's turns of the agent in the UTC day, in billionths of a US
-- dollar so that concurrent additions sum exactly.
CREATE TABLE agentkit_cost_daily (
    agent TEXT NOT NULL,
    day TEXT NOT NULL,
    cost_nano_usd BIGINT NOT NULL,
    PRIMARY KEY (agent, day)
);
