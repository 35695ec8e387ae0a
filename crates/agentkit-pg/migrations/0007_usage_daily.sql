-- Daily token budgets (`[harness] max_tokens_per_day`) count every host's
-- turns of the agent in the UTC day.
CREATE TABLE agentkit_usage_daily (
    agent TEXT NOT NULL,
    day TEXT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    PRIMARY KEY (agent, day)
);
