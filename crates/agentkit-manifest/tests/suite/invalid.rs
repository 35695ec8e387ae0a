//! One committed fixture per diagnostic: `fixtures/invalid/<area>/`, each
//! a project or a folder of projects, discovered and rendered one
//! diagnostic per line.

use expect_test::{Expect, expect};

use super::*;

/// Discovers `fixtures/invalid/<area>` and compares its diagnostics.
fn check(area: &str, expected: Expect) {
    let d = discover_ok(&fixtures().join("invalid").join(area));
    expected.assert_eq(&render(&d));
}

#[test]
fn instructions() {
    check(
        "instructions",
        expect![[r#"
            ambiguous/agent/instructions: error[ambiguous-instructions]: both `instructions.md` and `instructions/` exist (hint: keep one: a single file, or a folder of files composed in filename order)
            empty/agent/instructions.md: warning[empty-instructions]: the instructions are empty (hint: say who the agent is, which tool to use when, and the shape of its answers)
            folder/agent/instructions/notes.txt: warning[unknown-entry]: `notes.txt` is not composed into the instructions; only `*.md` files are
            missing/agent: error[missing-instructions]: the agent has no instructions (hint: create `agent/instructions.md` with the always-on system prompt)
            typescript-only/agent: error[missing-instructions]: the agent has no instructions (hint: create `agent/instructions.md` with the always-on system prompt)
            typescript-only/agent/instructions.ts: warning[typescript-definition]: TypeScript instructions cannot be loaded by this host (hint: write the prompt in `instructions.md`, or split it across `instructions/*.md`)
        "#]],
    );
}

/// An untranslated TypeScript project does not validate "ok": each
/// definition written for the original framework (it imports the package
/// or calls `define*`) is an error naming the file to write instead; a
/// helper script, or a leftover beside its translation, only warns.
#[test]
fn layout_typescript() {
    assert!(!discover_ok(&fixtures().join("invalid/layout/typescript")).is_ok());
    check(
        "layout/typescript",
        expect![[r#"
            agent/agent.ts: error[typescript-definition]: `agent.ts` is a TypeScript/JavaScript definition, which this host cannot load; it was written for the TypeScript framework and nothing here translates it (hint: write `agent/agent.toml` (model, runtime, harness))
            agent/channels/intake.ts: error[typescript-definition]: `intake.ts` is a TypeScript/JavaScript channel, which this host cannot load; it was written for the TypeScript framework and nothing here translates it (hint: write `channels/intake.toml` instead (channels/<id>.toml with `[[routes]]`, or `kind = "github"`))
            agent/hooks/audit.js: error[typescript-definition]: `audit.js` is a TypeScript/JavaScript hook, which this host cannot load; it was written for the TypeScript framework and nothing here translates it (hint: write `hooks/audit.toml` instead (hooks/<name>.toml with `events` and `command` or `url`))
            agent/hooks/notify.ts: warning[typescript-definition]: `notify.ts` is a TypeScript/JavaScript hook, which this host cannot load (hint: write `hooks/notify.toml` instead (hooks/<name>.toml with `events` and `command` or `url`))
            agent/instructions.ts: warning[typescript-definition]: TypeScript instructions cannot be loaded by this host (hint: write the prompt in `instructions.md`, or split it across `instructions/*.md`)
            agent/schedules/daily.ts: error[typescript-definition]: `daily.ts` is a TypeScript/JavaScript schedule, which this host cannot load; it was written for the TypeScript framework and nothing here translates it (hint: write `schedules/daily.md` (cron frontmatter + prompt) or `schedules/daily.toml` (cron + one action))
            agent/skills/helper.ts: error[typescript-definition]: `helper.ts` is a TypeScript/JavaScript skill, which this host cannot load; it was written for the TypeScript framework and nothing here translates it (hint: write `skills/helper.md` (or `skills/helper/SKILL.md`) with `description` frontmatter)
            agent/tools/format.js: warning[typescript-definition]: `format.js` is a TypeScript/JavaScript tool, which this host cannot load (hint: write `tools/format.toml` with `description`, `command` (e.g. ["node", "format.js"]) and `[input_schema]`)
            agent/tools/lookup.tool.ts: error[typescript-definition]: `lookup.tool.ts` is a TypeScript/JavaScript tool, which this host cannot load; it was written for the TypeScript framework and nothing here translates it (hint: write `tools/lookup.toml` with `description`, `command` (e.g. ["node", "lookup.tool.ts"]) and `[input_schema]`)
            agent/tools/x.ts: error[typescript-definition]: `x.ts` is a TypeScript/JavaScript tool, which this host cannot load; it was written for the TypeScript framework and nothing here translates it (hint: write `tools/x.toml` with `description`, `command` (e.g. ["node", "x.ts"]) and `[input_schema]`)
            evals/evals.config.ts: warning[typescript-definition]: TypeScript evals cannot be run by this host (hint: write `evals/evals.toml` with `max_concurrency`)
            evals/nyc.eval.ts: error[typescript-definition]: TypeScript evals cannot be run by this host; it was written for the TypeScript framework and nothing here translates it (hint: write `evals/nyc.eval.toml`)
        "#]],
    );
}

#[test]
fn layout_unknown() {
    check(
        "layout/unknown",
        expect![[r#"
            agent/channels/README.md: warning[unknown-entry]: `README.md` is not a channel definition; it is ignored (hint: channels are channels/<id>.toml with `[[routes]]`, or `kind = "github"`)
            agent/evals: warning[unknown-entry]: `agent/evals/` is ignored: evals live in the project's `evals/` folder, beside `agent/` (hint: move it up one level)
            agent/notes.txt: warning[unknown-entry]: unknown file `notes.txt`; agentkit does not discover it (hint: known here: agent.toml, instructions.md, instructions, tools, skills, mcp-connections, subagents, channels, hooks, schedules, ab.toml, ab, artifacts.toml, sandbox, lib; put shared files in `lib/`)
            agent/reminders: warning[unsupported]: `reminders`: file-defined reminders are not supported; reminders are created at runtime
            agent/sandbox/data.csv: warning[unknown-entry]: unknown file `data.csv`; agentkit does not discover it (hint: known here: workspace; put shared files in `lib/`)
            agent/schedules/notes.txt: warning[unknown-entry]: `notes.txt` is not a schedule; it is ignored (hint: schedules are `<id>.md` with `cron:` frontmatter or `<id>.toml`)
            agent/skills/notes.txt: warning[unknown-entry]: `notes.txt` is not a skill; skills are `<name>.md` files or `<name>/SKILL.md` folders
            agent/subagents/notes.md: warning[unknown-entry]: `notes.md` is not a subagent; subagents are folders (hint: create `subagents/notes/agent.toml` with `description`, and `instructions.md`)
            agent/tool: warning[unknown-entry]: unknown folder `tool`; agentkit does not discover it (hint: did you mean `tools`?)
        "#]],
    );
}

#[test]
fn config() {
    check(
        "config",
        expect![[r#"
            bad-cwd/agent/agent.toml:5:1: error[invalid-value]: `local.cwd` must be an absolute path, not `workspaces`
            bad-harness/agent/agent.toml:4:1: error[invalid-value]: unknown built-in tool `grpe` (hint: did you mean `grep`?)
            bad-harness/agent/agent.toml:5:1: error[invalid-value]: `max_steps` must be at least 1
            bad-harness/agent/agent.toml:6:1: error[invalid-duration]: `turn_timeout`: `ten minutes` is not a duration (expected number at 0); write e.g. `30s`, `10m` or `2h`
            bad-harness/agent/agent.toml:9:1: error[invalid-value]: unknown sandbox mode `strict` in `[harness.sandbox]` (hint: modes: enforce, warn, off)
            bad-model/agent/agent.toml:2:1: error[invalid-model]: unknown model provider `opnai` (hint: did you mean `openai`?)
            context/agent/agent.toml:3:1: error[invalid-model]: `model.max_output_tokens` (1000) must be less than `context_window` (1000)
            context/agent/agent.toml:10:1: error[invalid-value]: `compaction` is `sometimes`; it is `auto` (the default) or `off`
            context/agent/agent.toml:11:1: error[invalid-value]: `compaction_threshold` is 1.5; it is a fraction of the window, between 0 and 1
            context/agent/agent.toml:12:1: error[invalid-value]: `max_tokens_per_session` must be at least 1 (leave it out for no limit)
            context/agent/agent.toml:14:1: error[invalid-schema]: `output_schema` is not a valid JSON Schema: "nonsense" is not valid under any of the schemas listed in the 'anyOf' keyword (hint: `output_schema` is a JSON Schema (draft 2020-12) written as a table, e.g. type = "object" and [output_schema.properties])
            memory-unknown/agent/agent.toml:4:1: error[unknown-field]: unknown field `jornal` (hint: did you mean `journal`?)
            memory/agent/agent.toml:5:1: error[invalid-value]: `memory.journal_max_bytes` is 10; it is at least 256 (hint: leave it out for 1 MiB per file (docs/reference/memory.md))
            model-table/agent/agent.toml:3:1: error[invalid-model]: `[model]` needs `provider` (hint: e.g. provider = "openai")
            pricing/agent/agent.toml:7:1: error[invalid-value]: `[model.pricing]` needs `output` (hint: prices are US dollars per million tokens: `input`, `output`, `cache_read`, `cache_write` (the cache prices default to `input`))
            pricing/agent/agent.toml:8:1: error[invalid-value]: `model.pricing.input` is -1.5; a price is a number of US dollars, 0 or more (hint: prices are US dollars per million tokens: `input`, `output`, `cache_read`, `cache_write` (the cache prices default to `input`))
            pricing/agent/agent.toml:9:1: error[invalid-value]: unknown price `outptu` in `[model.pricing]` (hint: did you mean `output`? prices are US dollars per million tokens: `input`, `output`, `cache_read`, `cache_write` (the cache prices default to `input`))
            pricing/agent/agent.toml:10:1: error[invalid-value]: `model.pricing.cache_read` is "cheap"; a price is a number of US dollars, 0 or more (hint: prices are US dollars per million tokens: `input`, `output`, `cache_read`, `cache_write` (the cache prices default to `input`))
            pricing/agent/agent.toml:13:1: error[invalid-value]: `harness.budget.max_cost_usd_per_session` is 0; it is an amount of US dollars above 0 (hint: leave it out for no limit)
            pricing/agent/agent.toml:14:1: error[invalid-value]: `harness.budget.max_cost_usd_per_day` is -3; it is an amount of US dollars above 0 (hint: leave it out for no limit)
            runtime-cloud/agent/agent.toml:2:1: warning[unsupported]: `runtime = "cloud"` is not supported by this host; turns run locally (hint: remove `runtime` or set it to "local")
            runtime-cloud/agent/agent.toml:4:1: warning[unsupported]: `[cloud]` settings are not supported by this host and are ignored
            sandbox-off/agent/agent.toml:4:1: warning[sandbox-off]: `[harness.sandbox] mode = "off"` runs the `shell` built-in and every server tool unsandboxed (hint: without the sandbox, what the model runs (and what a prompt injected through a channel talks it into) can read the host's stored provider keys, every session's workspace and the project's files, and reach any address; keep the sandbox on and widen it with `read`, `write` or `network` instead (docs/reference/sandbox.md))
            scripted-missing/agent/agent.toml:2:1: error[missing-file]: model script `scripts/missing.json` does not exist (hint: scripted model paths are relative to the `agent/` folder)
            sessions-short/agent/agent.toml:4:1: error[invalid-duration]: `sessions.retention` is `500ms`; it is at least one second (hint: write e.g. `30d`, or leave it out to keep sessions until deleted)
            sessions/agent/agent.toml:4:1: error[invalid-duration]: `sessions.retention`: `a month` is not a duration (expected number at 0); write e.g. `30s`, `10m` or `2h` (hint: write e.g. `30d`, or leave it out to keep sessions until deleted)
            sessions/agent/agent.toml:5:1: error[invalid-value]: `sessions.max_sessions` must be at least 1 (hint: leave it out to keep any number)
            toml-syntax/agent/agent.toml:2:29: error[toml-invalid]: invalid basic string, expected `"`
            unknown-field/agent/agent.toml:4:1: error[unknown-field]: unknown field `max_stpes` (hint: did you mean `max_steps`?)
        "#]],
    );
}

#[test]
fn tools() {
    check(
        "tools",
        expect![[r#"
            agent/tools/2fast.toml: error[invalid-name]: `2fast` is not a valid tool name (hint: tool names start with a letter and use letters, digits, `-` and `_` (no `__`), at most 64 characters)
            agent/tools/agent_needs_approval.toml:4:1: error[conflicting-fields]: approvals apply to server tools only; the model runs agent tools itself
            agent/tools/agent_no_script.toml:2:1: error[missing-field]: agent tool `agent_no_script` needs a `script` or `script_file`
            agent/tools/agent_with_command.toml:4:1: error[conflicting-fields]: `command` is for server tools; agent tools have a `script`
            agent/tools/agent_worker.toml:4:1: error[conflicting-fields]: `worker` is for server tools; the model runs agent tools itself
            agent/tools/approval_schema.toml:4:1: error[invalid-schema]: `needs_approval` schema is invalid: "amount" is not of type "array" at `/required`
            agent/tools/bad_approval.toml:3:1: error[invalid-value]: `needs_approval` must be a boolean or a JSON Schema table, not a string
            agent/tools/bad_env.toml:3:1: error[invalid-value]: `env` entry `API-KEY` is not an environment variable name
            agent/tools/bad_execution.toml:2:13: error[toml-invalid]: unknown variant `cloud`, expected `server` or `agent`
            agent/tools/bad_sandbox.toml:3:1: error[invalid-value]: `sandbox`: invalid type: string "yes", expected a boolean (hint: keys: mode, network, read, write, [sandbox.limits])
            agent/tools/bad_schema.toml:4:1: error[invalid-schema]: invalid input schema: "strng" is not valid under any of the schemas listed in the 'anyOf' keyword at `/properties/city/type`
            agent/tools/bad_schema_file.json:3:18: error[invalid-schema]: not valid JSON: key must be a string
            agent/tools/bad_timeout.toml:3:1: error[invalid-duration]: `timeout`: `30` is not a duration (time unit needed, for example 30sec or 30ms); write e.g. `30s`, `10m` or `2h`
            agent/tools/bad_worker.toml:3:1: error[invalid-value]: `worker.concurrency` must be a whole number from 1 to 64, not 0 (hint: how many calls one worker process takes at once; more wait their turn)
            agent/tools/bad_worker.toml:3:1: error[invalid-value]: `worker.scope` must be "agent" or "session", not "tenant" (hint: "agent" (the default): one worker for every session; "session": one per session, which may keep its state)
            agent/tools/bad_worker.toml:3:1: error[invalid-value]: `worker` has no field `queue` (hint: the `[worker]` table takes `concurrency`, `idle_timeout` and `scope`)
            agent/tools/bad_worker.toml:3:1: error[invalid-duration]: `worker.idle_timeout` is `500ms`; it is at least one second (hint: how long a worker with no call in flight lives, e.g. `10m` (the default))
            agent/tools/both_schemas.toml:3:1: error[conflicting-fields]: set `input_schema` or `input_schema_file`, not both
            agent/tools/empty_command.toml:2:1: error[invalid-value]: `command` must name a program
            agent/tools/linear__search.toml: error[invalid-name]: `linear__search` is not a valid tool name (hint: tool names start with a letter and use letters, digits, `-` and `_` (no `__`), at most 64 characters)
            agent/tools/missing_program.toml:2:1: error[missing-file]: program `./missing.sh` does not exist (hint: relative commands resolve from the tool file's folder)
            agent/tools/missing_schema_file.toml:3:1: error[missing-file]: `input_schema_file`: cannot read `nope.json`: No such file or directory (os error 2)
            agent/tools/no_command.toml: error[missing-field]: server tool `no_command` needs a `command` (hint: e.g. command = ["python3", "get_weather.py"], relative to this file's folder)
            agent/tools/no_description.toml: error[missing-field]: tool `no_description` needs a `description` (hint: the model reads it to decide when to call the tool)
            agent/tools/read.toml: error[duplicate-name]: tool `read` has the name of the built-in `read` tool (hint: rename the file; built-in tools are set in `agent.toml` `[harness] builtin_tools`)
            agent/tools/server_with_script.toml:3:1: error[conflicting-fields]: `script` and `script_file` are for `execution = "agent"` tools (hint: a server tool runs `command`)
            agent/tools/string_schema.toml:4:1: error[invalid-schema]: invalid input schema: `type` is "string"; a tool input schema must have `type = "object"`
            agent/tools/typo.toml:3:1: error[unknown-field]: unknown field `needs_aproval` (hint: did you mean `needs_approval`?)
            agent/tools/unsandboxed.toml:3:1: warning[sandbox-off]: tool `unsandboxed` turns the sandbox off (hint: without the sandbox, what the model runs (and what a prompt injected through a channel talks it into) can read the host's stored provider keys, every session's workspace and the project's files, and reach any address; keep it off only for a program you trust that never runs what a model or a message wrote, or widen the sandbox with `read`, `write` or `network` instead)
            agent/tools/worker_string.toml:3:1: error[invalid-value]: `worker` must be a boolean or a table, not a string (hint: `worker = true`, or a `[worker]` table with `concurrency`)
        "#]],
    );
}

#[test]
fn skills() {
    check(
        "skills",
        expect![[r#"
            agent/skills/bad name.md: error[invalid-name]: `bad name` is not a valid skill name (hint: names use letters, digits, `-` and `_`, starting with a letter or digit)
            agent/skills/bad-shape.md:2:14: error[frontmatter-invalid]: invalid frontmatter: description: invalid type: sequence, expected a string
            agent/skills/bad-yaml.md:3:6: error[frontmatter-invalid]: invalid frontmatter: mapping values are not allowed in this context
            agent/skills/empty.md: error[missing-description]: skill `empty` is empty: it has no description and no text (hint: add `description:` frontmatter saying when to use the skill)
            agent/skills/forecast.md: error[duplicate-name]: skill `forecast` is also defined by `agent/skills/forecast/SKILL.md`
            agent/skills/no-description/SKILL.md:1:1: error[missing-description]: packaged skill `no-description` needs `description` frontmatter (hint: start SKILL.md with frontmatter: a `---` line, `description: Use when …`, then a closing `---` line)
            agent/skills/no-skill-md: error[missing-file]: skill folder `no-skill-md` has no `SKILL.md` (hint: a packaged skill is `skills/<name>/SKILL.md` with `description` frontmatter; a single file can be `skills/<name>.md`)
        "#]],
    );
}

#[test]
fn subagents() {
    check(
        "subagents",
        expect![[r#"
        agent/subagents/broken/agent.toml:1:31: error[toml-invalid]: unexpected key or value, expected newline, `#`
        agent/subagents/capable/notes.md: warning[unknown-entry]: unknown file `notes.md`; agentkit does not discover it (hint: known here: agent.toml, instructions.md, instructions; put shared files in `lib/`)
        agent/subagents/capable/subagents: warning[subagent-ignored]: `subagents` inside subagent `capable` is ignored: nested subagents are not supported (hint: move it to the root agent's `agent/subagents`)
        agent/subagents/capable/tools: warning[subagent-ignored]: `tools` inside subagent `capable` is ignored: subagents inherit the parent's tools, skills and connections (hint: move it to the root agent's `agent/tools`)
        agent/subagents/no-config: error[missing-file]: subagent `no-config` has no `agent.toml` (hint: create it with `description = "…"`: the parent model reads it to decide when to delegate)
        agent/subagents/no-description/agent.toml: error[missing-description]: subagent `no-description` needs a `description` (hint: write it as a routing rule: "Background research: climate history, records …")
    "#]],
    );
}

#[test]
fn schedules() {
    check(
        "schedules",
        expect![[r#"
            agent/schedules/bad-handler.toml:2:1: error[invalid-value]: `handler = "no good"` is not a valid handler name (hint: letters, digits, `-` and `_`, starting with a letter or digit)
            agent/schedules/bad-output-schema.md:3:1: error[invalid-schema]: `output_schema` is not a valid JSON Schema: "objekt" is not valid under any of the schemas listed in the 'anyOf' keyword (hint: `output_schema` is a JSON Schema (draft 2020-12) written as a table, e.g. type = "object" and [output_schema.properties])
            agent/schedules/channel-without-message.toml:3:1: error[conflicting-fields]: `channel` goes with `message`
            agent/schedules/cron-md.md:2:1: error[invalid-cron]: `0 9 * *` has 4 fields; cron here is 5 fields: minute hour day-of-month month day-of-week (hint: standard 5-field cron in UTC, e.g. "*/30 * * * *")
            agent/schedules/cron-toml.toml:1:1: error[invalid-cron]: `61 * * * *`: minute value 61 is out of range 0–59 (hint: standard 5-field cron in UTC, e.g. "*/30 * * * *")
            agent/schedules/no-action.toml: error[schedule-actions]: schedule `no-action` has no action (hint: one of `markdown = "…"` (a task session), `message = "…"` (+ optional `channel`), `[tool]` with `name` and `input`, `handler = "<name>"` (a Rust handler the embedder registers), or `command = ["…"]` (a program with the host bridge))
            agent/schedules/no-cron.md: error[missing-field]: schedule needs `cron` (hint: e.g. cron: "0 9 * * 1-5" (minute hour day-of-month month day-of-week, UTC))
            agent/schedules/no-prompt.md: error[missing-field]: schedule `no-prompt` has no prompt: the Markdown body is empty
            agent/schedules/output-schema-on-tool.toml:2:1: error[conflicting-fields]: `output_schema` goes with `markdown` or `message` (a turn's reply) (hint: a tool, command or handler schedule has no model reply to shape)
            agent/schedules/rust-handler.toml: warning[unknown-reference]: schedule `rust-handler` runs Rust handler `sweep`: only a program that registers it can serve this agent (`agentkit serve` refuses to start) (hint: register it with ServeOptions::schedule_handler("sweep", …))
            agent/schedules/two-actions.toml:3:1: error[schedule-actions]: schedule `two-actions` has 2 actions (markdown, message); it must have exactly one (hint: one of `markdown = "…"` (a task session), `message = "…"` (+ optional `channel`), `[tool]` with `name` and `input`, `handler = "<name>"` (a Rust handler the embedder registers), or `command = ["…"]` (a program with the host bridge))
            agent/schedules/typo.md:2:1: error[frontmatter-invalid]: invalid frontmatter: unknown field `corn`, expected one of `cron`, `description`, `output_schema`
            agent/schedules/unknown-channel.toml: error[unknown-reference]: schedule `unknown-channel` hands off to unknown channel `slack-intak` (hint: did you mean `slack-intake`?)
            agent/schedules/unknown-tool.toml: error[unknown-reference]: schedule `unknown-tool`: no tool `get_wether`; did you mean `get_weather`?
        "#]],
    );
}

#[test]
fn channels() {
    check(
        "channels",
        expect![[r#"
            agent/channels/bad-auth.toml:1:1: error[invalid-auth]: unknown auth policy `local_dev_strct` (hint: did you mean `local_dev_strict`?)
            agent/channels/bad-event.toml:7:1: error[unknown-event]: unknown event `message.complete` (hint: did you mean `message.completed`?)
            agent/channels/bad-kind.toml:1:1: error[invalid-value]: unknown channel kind `githb` (hint: did you mean `github`?)
            agent/channels/bad-max-body.toml:2:1: error[invalid-value]: `max_body`: `25 MiBs`: unknown unit `mibs` (hint: a size such as "25MiB", "512KiB" or "10MB", or a number of bytes)
            agent/channels/bad-method.toml:1:1: error[invalid-route]: unknown method `FETCH` (hint: GET, POST, PUT, PATCH or DELETE)
            agent/channels/bad-output-schema.toml:1:1: error[invalid-schema]: POST /triage: `send.output_schema` is not a valid JSON Schema: "severity" is not of type "array" (hint: a JSON Schema (draft 2020-12) written as TOML, e.g. [routes.send.output_schema] with type = "object")
            agent/channels/bad-path.toml:7:1: error[invalid-route]: route path `/expense/{team}` has a bad segment `{team}`
            agent/channels/bad-schema.toml:1:1: error[invalid-schema]: POST /in: invalid `body_schema`: "amount" is not of type "array" at `/required`
            agent/channels/bad-template.toml:1:1: error[invalid-template]: POST /expense/:team: `send.message`: syntax error: unexpected `}`, expected end of variable block (template line 1)
            agent/channels/bearer-without-token.toml:1:1: error[invalid-auth]: `bearer` needs a non-empty `token` or `tokens`
            agent/channels/call-unknown-tool.toml: error[unknown-reference]: GET /note: tool `note` runs in the agent's workspace (`execution = "agent"`) and cannot be called by the host
            agent/channels/call-unknown-tool.toml: error[unknown-reference]: GET /order: no tool `lookup_ordr`; did you mean `lookup_order`?
            agent/channels/does-nothing.toml: warning[missing-field]: channel `does-nothing` has no `[[routes]]` and no `[events]`; it does nothing (hint: add a [[routes]] table with `method`, `path` and a `[routes.send]` or `[routes.call_tool]`)
            agent/channels/duplicate-route.toml:7:1: error[invalid-route]: route POST /teams/:name is declared twice
            agent/channels/get-without-query-schema.toml:1:1: error[route-schema-required]: GET /orders/:id needs a `query_schema` (hint: GET routes validate their query string; use `[routes.query_schema]` with `type = "object"` for an open surface)
            agent/channels/http-elsewhere.toml:1:1: error[invalid-value]: `kind = "http"` configures the built-in HTTP channel and must be in `channels/http.toml`
            agent/channels/http.toml:2:1: error[invalid-auth]: `public_endpoint` never opens the built-in session API (hint: use `bearer` or `allow_all` (behind your own proxy) instead)
            agent/channels/no-slash.toml:1:1: error[invalid-route]: route path `expense` must begin with `/`
            agent/channels/post-without-body-schema.toml:1:1: error[route-schema-required]: POST /expense needs a `body_schema` (hint: POST, PUT and PATCH routes validate their body; use `[routes.body_schema]` with `type = "object"` for an open surface)
            agent/channels/typo.toml:5:1: error[unknown-field]: unknown field `sned` (hint: did you mean `send`?)
            agent/channels/zero-max-body.toml:2:1: error[invalid-value]: `max_body`: a limit of 0 bytes refuses every request (hint: a size such as "25MiB", "512KiB" or "10MB", or a number of bytes)
        "#]],
    );
}

/// Route handlers, chained actions, command schedules and host-only
/// tools: each bad table is its own diagnostic.
#[test]
fn handlers() {
    check(
        "handlers",
        expect![[r#"
        agent/channels/chain.toml: error[unknown-reference]: POST /chain: no tool `lookp`; did you mean `lookup`?
        agent/channels/handlers.toml:1:1: error[conflicting-fields]: POST /both has a `handler` and also `send`, `call_tool` or `response` (hint: a handler answers the route itself (its stdout is the response); drop the other tables, or drop the handler)
        agent/channels/handlers.toml:11:1: error[missing-field]: POST /no-command: `handler` needs a `command` (hint: e.g. command = ["python3", "lib/alert.py"], run in the agent folder)
        agent/channels/handlers.toml:19:1: error[invalid-value]: POST /bad-header: `handler.headers` entry `x desk` is not a header name
        agent/channels/handlers.toml:28:1: error[invalid-duration]: POST /bad-timeout: `handler`: `timeout`: `soon` is not a duration (expected number at 0); write e.g. `30s`, `10m` or `2h`
        agent/channels/handlers.toml:37:1: error[missing-file]: POST /missing-program: `handler`: program `./lib/nope.sh` does not exist (hint: relative programs resolve from the agent folder (`agent/`))
        agent/schedules/command-and-message.toml:3:1: error[schedule-actions]: schedule `command-and-message` has 2 actions (message, command); it must have exactly one (hint: one of `markdown = "…"` (a task session), `message = "…"` (+ optional `channel`), `[tool]` with `name` and `input`, `handler = "<name>"` (a Rust handler the embedder registers), or `command = ["…"]` (a program with the host bridge))
        agent/schedules/empty-command.toml:2:1: error[invalid-value]: schedule `empty-command`: `command` must name a program (hint: e.g. command = ["python3", "lib/alert.py"])
        agent/schedules/timeout-without-command.toml:3:1: error[conflicting-fields]: `timeout` goes with `command`
        agent/tools/agent-host.toml:4:1: error[conflicting-fields]: `expose = "host"` is for server tools; the model runs agent tools itself
        agent/tools/bad-expose.toml:3:10: error[toml-invalid]: unknown variant `nobody`, expected `model` or `host`
    "#]],
    );
}

#[test]
fn hooks() {
    check(
        "hooks",
        expect![[r#"
        agent/hooks/audit.sh: warning[unknown-entry]: `audit.sh` is not a hook definition; it is ignored (hint: hooks are hooks/<name>.toml with `events` and `command` or `url`)
        agent/hooks/bad-event.toml:1:1: error[unknown-event]: unknown event `turn.complete` (hint: did you mean `turn.completed`?)
        agent/hooks/bad-timeout.toml:3:1: error[invalid-duration]: `timeout`: `0s` is zero; a duration must be positive
        agent/hooks/both.toml:3:1: error[conflicting-fields]: set `command` or `url`, not both
        agent/hooks/no-action.toml: error[missing-field]: hook `no-action` needs a `command` (event JSON on stdin) or a `url` (event POSTed)
        agent/hooks/no-events.toml: error[missing-field]: hook `no-events` needs `events` (hint: e.g. events = ["turn.completed"] or ["*"])
    "#]],
    );
}

#[test]
fn ab() {
    check(
        "ab",
        expect![[r#"
            one-variant/agent/ab.toml:3:1: error[invalid-experiment]: experiment `ab` has 1 variant(s); it needs at least two (hint: an experiment has `traffic` (0–1) and two or more `[[variants]]` with unique `id` and positive `weight`)
            variants/agent/ab.toml: error[duplicate-name]: experiment `ab` is also defined by `variants/agent/ab/ab.toml`
            variants/agent/ab/models.toml:6:1: error[invalid-model]: model `gpt-4.1` names no provider (hint: write `provider:model`, e.g. "openai:gpt-4.1" or "anthropic:gpt-4.1")
            variants/agent/ab/overrides.toml:1:1: error[invalid-experiment]: `sticky` is `device`; it is `key` (the default) or `principal` (hint: an experiment has `traffic` (0–1) and two or more `[[variants]]` with unique `id` and positive `weight`)
            variants/agent/ab/overrides.toml:8:16: error[missing-file]: variant instructions file `agent/ab/missing.md` does not exist
            variants/agent/ab/overrides.toml:10:1: error[invalid-experiment]: variant `lean` has `max_steps = 0`; it must be at least 1 (hint: an experiment has `traffic` (0–1) and two or more `[[variants]]` with unique `id` and positive `weight`)
            variants/agent/ab/overrides.toml:14:16: error[invalid-experiment]: variant `instructions = "../outside.md"` must be a relative path inside `agent/` (hint: for example `instructions = "ab/terse.md"`)
            variants/agent/ab/tools.toml: error[unknown-reference]: variant `lean` of experiment `tools` offers unknown tool `get_wether`
            variants/agent/ab/traffic.toml:1:1: error[invalid-experiment]: `traffic` is 1.5; it is the enrolled fraction, from 0 to 1 (hint: an experiment has `traffic` (0–1) and two or more `[[variants]]` with unique `id` and positive `weight`)
            variants/agent/ab/traffic.toml:4:1: error[invalid-experiment]: variant id `a` appears twice (hint: an experiment has `traffic` (0–1) and two or more `[[variants]]` with unique `id` and positive `weight`)
        "#]],
    );
}

/// `artifacts.toml`: a schema that does not compile or is not a table,
/// a kind without a description, `agent_tool` without kinds, a bad `max`
/// and kind name, and an unknown field; `fine` has nothing to report.
#[test]
fn artifacts() {
    check(
        "artifacts",
        expect![[r#"
        bad-schema/agent/artifacts.toml:5:1: error[invalid-schema]: artifact kind `finding`: `schema` is not a valid JSON Schema: "integr" is not valid under any of the schemas listed in the 'anyOf' keyword at `/properties/line/type` (hint: `schema` is a JSON Schema (draft 2020-12) written as a table, e.g. schema = { type = "object", required = ["file"] })
        bad-schema/agent/artifacts.toml:9:1: error[invalid-schema]: artifact kind `note`: `schema` must be a table (a JSON Schema object) (hint: `schema` is a JSON Schema (draft 2020-12) written as a table, e.g. schema = { type = "object", required = ["file"] })
        bad-values/agent/artifacts.toml:1:1: error[invalid-value]: `max` is 0; it is how many artifacts to keep, at least 1 (hint: leave `max` out to keep every artifact)
        bad-values/agent/artifacts.toml:3:1: error[invalid-name]: artifact kind `bad kind` is not a valid name (hint: a kind is letters, digits, `_` and `-`, starting with a letter or digit, at most 64 characters)
        no-description/agent/artifacts.toml:1:1: error[missing-description]: artifact kind `finding` has no description (hint: say what one such record is, e.g. description = "A review finding posted on a pull request"; the model reads it)
        no-description/agent/artifacts.toml:5:1: error[missing-description]: artifact kind `journal` has no description (hint: say what one such record is, e.g. description = "A review finding posted on a pull request"; the model reads it)
        tool-without-kinds/agent/artifacts.toml:2:1: error[missing-field]: `agent_tool = true` offers the model `tag_artifact`, which needs at least one kind (hint: declare a kind: [kinds.finding] with `description` (and an optional `schema`))
        unknown-field/agent/artifacts.toml:1:1: error[unknown-field]: unknown field `retention` (hint: known fields: agent_tool, max, kinds)
    "#]],
    );
}

#[test]
fn evals() {
    check(
        "evals",
        expect![[r#"
            files/evals/bad-case-id.eval.toml:2:6: error[invalid-eval]: case id `a/b` must be one path segment of letters, digits, `-` and `_`
            files/evals/bad-output-schema.eval.toml:2:1: error[invalid-schema]: `output_schema` must be a table (a JSON Schema object) (hint: `output_schema` is a JSON Schema (draft 2020-12) written as a table, e.g. type = "object" and [output_schema.properties])
            files/evals/bad-regex.eval.toml:4:22: error[invalid-regex]: regex `recorded (12.50`: error: unclosed group
            files/evals/bad-timeout.eval.toml:1:1: error[invalid-duration]: `timeout`: `soon` is not a duration (expected number at 0); write e.g. `30s`, `10m` or `2h`
            files/evals/duplicate-cases.eval.toml:6:6: error[invalid-eval]: case id `nyc` appears twice
            files/evals/file-path.eval.toml:4:19: error[invalid-value]: file expectation path `../etc/passwd` must be relative to the workspace
            files/evals/nested.eval.toml: error[duplicate-name]: eval id `nested` is also used by `files/evals/nested/index.eval.toml`
            files/evals/nothing.eval.toml: error[invalid-eval]: eval has nothing to run (hint: one turn: `send` + `[expect]`; several turns: `[[turns]]`; several datapoints: `[[cases]]` with `id`)
            files/evals/send-and-cases.eval.toml: error[invalid-eval]: eval sets more than one of `send`, `[[turns]]` and `[[cases]]` (hint: one turn: `send` + `[expect]`; several turns: `[[turns]]`; several datapoints: `[[cases]]` with `id`)
            files/evals/typo.eval.toml:4:1: error[unknown-field]: unknown field `suceeded` (hint: did you mean `succeeded`?)
            files/evals/unknown-tool.eval.toml: warning[unknown-reference]: case `unknown-tool` expects tool `get_wether`, which the agent does not have (hint: did you mean `get_weather`?)
            no-config/evals/evals.toml: error[evals-config-missing]: evals exist but `evals/evals.toml` does not (hint: create it with `max_concurrency = 8` (at most 200))
            no-max-concurrency/evals/evals.toml: error[missing-field]: `max_concurrency` is required (hint: how many eval turns may run at once, 1 to 200)
            too-concurrent/evals/evals.toml:1:1: error[invalid-value]: `max_concurrency` is 201; it must be 1 to 200 (hint: model providers limit concurrent requests; 200 is the hard cap)
        "#]],
    );
}

#[test]
fn connections() {
    check(
        "connections",
        expect![[r#"
        alpha/agent/mcp-connections/myself.toml: error[peer-self]: connection `myself` names this agent itself (`alpha`) as its peer
        alpha/agent/mcp-connections/typo.toml: error[unknown-reference]: connection `typo` names unknown peer agent `bta` (hint: did you mean `beta`?)
        beta/agent/mcp-connections/Bad.Name.toml: error[invalid-name]: `Bad.Name` is not a valid connection name (hint: names use letters, digits, `-` and `_`, starting with a letter or digit)
        beta/agent/mcp-connections/bad-url.toml:1:1: error[invalid-value]: `url` must be an http(s) URL, not `ftp://mcp.example.com`
        beta/agent/mcp-connections/both.toml:2:1: error[conflicting-fields]: connection `both` sets `url` and `command`; choose one transport (hint: `url` (+ `headers`) for streamable HTTP, `command` (+ `args`, `env`, `cwd`) for stdio, `agent = "<slug>"` for a peer agent, `a2a = "<agent card URL>"` (+ `headers`) for a remote A2A agent)
        beta/agent/mcp-connections/none.toml: error[missing-field]: connection `none` needs one of `url`, `command`, `agent` or `a2a` (hint: `url` (+ `headers`) for streamable HTTP, `command` (+ `args`, `env`, `cwd`) for stdio, `agent = "<slug>"` for a peer agent, `a2a = "<agent card URL>"` (+ `headers`) for a remote A2A agent)
        beta/agent/mcp-connections/unknown.toml: error[unknown-reference]: connection `unknown` names unknown peer agent `gamma` (hint: agents on this host: alpha)
    "#]],
    );
}

#[test]
fn slugs() {
    check(
        "slugs",
        expect![[r#"
        v1: error[invalid-slug]: `v1` is a reserved path segment and cannot be an agent slug (hint: reserved: v1, playground, docs)
    "#]],
    );
}

#[test]
fn no_agents() {
    check(
        "no-agents",
        expect![[r#"
        .: error[no-agents]: no agent project here: neither this folder nor any child folder has an `agent/` folder (hint: run `agentkit init <dir>` to scaffold one)
    "#]],
    );
}
