-- Run-form reminders across hosts: the name of the Rust handler each host
-- registered (every host serves the same project), which the host that
-- claims the reminder calls. NULL for prompt-form reminders.
ALTER TABLE agentkit_reminders ADD COLUMN handler TEXT;
