//! `agentkit eval` as a child process against offline models (`test`,
//! `scripted:<file>`) and the mock provider: listing without a model
//! call, failing suites with every expectation reported, selectors, tags,
//! JUnit, iterations, the concurrency bound, file expectations, judges,
//! record then replay, baselines; and the eval dev routes over HTTP.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};
use agentkit_test_support::provider::{MockProvider, Reply, Step};
use serde_json::{Value, json};

use super::{Run, agentkit, agentkit_with};

/// A project (`proj`, its slug) in a temporary folder.
struct Proj {
    tmp: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Proj {
    fn path(&self) -> &Path {
        &self.path
    }
}

/// A project in a temporary folder: `files` are (path, content) pairs;
/// the agent runs on `model` with no built-in tools unless its
/// agent.toml is among `files`.
fn project(model: &str, files: &[(&str, &str)]) -> Proj {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Proj {
        path: tmp.path().join("proj"),
        tmp,
    };
    let mut all: Vec<(String, String)> = vec![
        (
            "agent/agent.toml".into(),
            format!("model = \"{model}\"\n[harness]\nbuiltin_tools = []\n"),
        ),
        (
            "agent/instructions.md".into(),
            "You answer weather questions.\n".into(),
        ),
        ("evals/evals.toml".into(), "max_concurrency = 4\n".into()),
    ];
    for (path, content) in files {
        all.retain(|(p, _)| p != path);
        all.push(((*path).to_owned(), (*content).to_owned()));
    }
    for (path, content) in all {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// Cities: `paris` passes on the `test` model (its reply quotes the
/// message); `oslo` fails three of its five expectations.
const CITIES: &str = r#"
tags = ["weather"]

[[cases]]
id = "paris"
send = "Weather in Paris?"
expect = { succeeded = true, reply = { contains = "Paris" } }

[[cases]]
id = "oslo"
tags = ["cold"]
send = "Weather in Oslo?"
[cases.expect]
succeeded = true
called_tool = ["get_weather"]
not_called_tool = ["post_alert"]
reply = { contains = "Paris", matches = "(?i)sunny" }
"#;

const GREETING: &str = r#"
description = "Says hello"
tags = ["smoke"]
send = "Hello there"
[expect]
reply = { matches = "^You said: Hello" }
"#;

fn cities_project() -> Proj {
    project(
        "test",
        &[
            ("evals/cities.eval.toml", CITIES),
            ("evals/greet/hello.eval.toml", GREETING),
        ],
    )
}

fn eval(dir: &Path, args: &[&str]) -> Run {
    let mut all = vec!["eval", "--dir", "."];
    all.extend_from_slice(args);
    agentkit(dir, &all)
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn case_ids(doc: &Value) -> Vec<String> {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn list_prints_ids_tags_and_descriptions_and_calls_no_model() {
    let mock = MockProvider::start(vec![]);
    let dir = project(
        "openai:gpt-mock",
        &[
            ("evals/cities.eval.toml", CITIES),
            ("evals/greet/hello.eval.toml", GREETING),
        ],
    );
    let run = agentkit_with(dir.path(), &["eval", "--dir", ".", "--list"], |c| {
        c.env("OPENAI_BASE_URL", mock.openai_base_url())
            .env("OPENAI_API_KEY", "sk-test");
    });
    assert_eq!(run.code, 0, "{}", run.stderr);
    expect_test::expect![[r#"
        cities/paris  [weather]
        cities/oslo   [weather, cold]
        greet/hello   [smoke]  Says hello
    "#]]
    .assert_eq(&run.stdout);
    let run = agentkit(
        dir.path(),
        &["eval", "--dir", ".", "--list", "--json", "--tag", "cold"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json_of(&run);
    assert_eq!(case_ids(&doc), ["cities/oslo"]);
    assert_eq!(doc["cases"][0]["tags"], json!(["weather", "cold"]));
    assert!(mock.requests().is_empty(), "--list called the model");
}

#[test]
fn a_failing_case_exits_1_and_reports_every_expectation() {
    let dir = cities_project();
    let run = eval(dir.path(), &["--no-stream"]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    for line in [
        "PASS cities/paris",
        "PASS greet/hello",
        "FAIL cities/oslo #1",
        "  - turn 1: expected `get_weather` is called; calls: no tools were called",
        "  - turn 1: expected the reply contains \"Paris\"; the reply was \"You said: Weather in Oslo? I called no tools.\"",
        "  - turn 1: expected the reply matches /(?i)sunny/; the reply was \"You said: Weather in Oslo? I called no tools.\"",
        "2 passed, 1 failed (3 cases, 3 runs,",
    ] {
        assert!(
            run.stdout.contains(line),
            "missing {line:?} in\n{}",
            run.stdout
        );
    }

    let run = eval(dir.path(), &["--json", "cities/oslo"]);
    assert_eq!(run.code, 1);
    let doc = json_of(&run);
    assert_eq!(doc["ok"], false);
    assert_eq!(
        doc["summary"],
        json!({"cases": 1, "passed": 0, "failed": 1, "runs": 1})
    );
    let case = &doc["cases"][0];
    assert_eq!(case["outcome"], "failed");
    let turn = &case["runs"][0]["turns"][0];
    assert!(
        case["runs"][0]["sessionId"]
            .as_str()
            .unwrap()
            .starts_with("ses_")
    );
    let checks: Vec<(String, bool)> = turn["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["kind"].as_str().unwrap().to_owned(), c["passed"] == true))
        .collect();
    let expected: Vec<(String, bool)> = [
        ("succeeded", true),
        ("called_tool", false),
        ("not_called_tool", true),
        ("reply.contains", false),
        ("reply.matches", false),
    ]
    .iter()
    .map(|(k, p)| ((*k).to_owned(), *p))
    .collect();
    assert_eq!(checks, expected);
    let contains = &turn["checks"][3];
    assert_eq!(contains["expected"], "the reply contains \"Paris\"");
    assert_eq!(
        contains["seen"],
        "You said: Weather in Oslo? I called no tools."
    );
    assert!(case["usage"]["inputTokens"].as_u64().unwrap() > 0);
}

#[test]
fn selectors_pick_cases_files_and_folders_and_tags_filter() {
    let dir = cities_project();
    let ids = |args: &[&str]| {
        let mut all = vec!["--list", "--json"];
        all.extend_from_slice(args);
        let run = eval(dir.path(), &all);
        assert_eq!(run.code, 0, "{}", run.stderr);
        case_ids(&json_of(&run))
    };
    assert_eq!(ids(&["cities/oslo"]), ["cities/oslo"]);
    assert_eq!(ids(&["cities"]), ["cities/paris", "cities/oslo"]);
    assert_eq!(ids(&["greet"]), ["greet/hello"]);
    assert_eq!(
        ids(&["greet/hello", "cities/paris"]),
        ["cities/paris", "greet/hello"]
    );
    assert_eq!(
        ids(&["--tag", "smoke", "--tag", "cold"]),
        ["cities/oslo", "greet/hello"]
    );
    // A run covers exactly what is selected.
    let run = eval(dir.path(), &["--json", "cities/paris", "greet"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(case_ids(&json_of(&run)), ["cities/paris", "greet/hello"]);
    let run = eval(dir.path(), &["--json", "--tag", "weather"]);
    assert_eq!(run.code, 1);
    assert_eq!(case_ids(&json_of(&run)), ["cities/paris", "cities/oslo"]);
}

#[test]
fn an_unknown_selector_is_a_usage_error_naming_it_and_runs_nothing() {
    let mock = MockProvider::start(vec![]);
    let dir = project("openai:gpt-mock", &[("evals/cities.eval.toml", CITIES)]);
    let run = agentkit_with(
        dir.path(),
        &["eval", "--dir", ".", "cities/paris", "citys"],
        |c| {
            c.env("OPENAI_BASE_URL", mock.openai_base_url())
                .env("OPENAI_API_KEY", "sk-test");
        },
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("no eval matches `citys`; known ids: cities, cities/oslo, cities/paris"),
        "{}",
        run.stderr
    );
    assert!(mock.requests().is_empty());
}

#[test]
fn junit_has_one_testcase_per_case_and_iteration_with_failures() {
    let dir = cities_project();
    let run = eval(
        dir.path(),
        &["--no-stream", "--iterations", "2", "--junit", "report.xml"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let xml = std::fs::read_to_string(dir.path().join("report.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites = doc.root_element();
    assert_eq!(suites.tag_name().name(), "testsuites");
    assert_eq!(suites.attribute("tests"), Some("6"));
    assert_eq!(suites.attribute("failures"), Some("2"));
    let cases: Vec<roxmltree::Node<'_, '_>> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<&str> = cases.iter().filter_map(|c| c.attribute("name")).collect();
    assert_eq!(
        names,
        [
            "cities/paris [1/2]",
            "cities/paris [2/2]",
            "cities/oslo [1/2]",
            "cities/oslo [2/2]",
            "greet/hello [1/2]",
            "greet/hello [2/2]",
        ]
    );
    assert_eq!(cases[2].attribute("classname"), Some("proj.cities"));
    let failure = cases[2]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(
        failure.attribute("message"),
        Some("turn 1: expected `get_weather` is called; calls: no tools were called")
    );
    let body = failure.text().unwrap();
    assert_eq!(body.lines().count(), 3, "{body}");
    assert!(
        body.contains("expected the reply matches /(?i)sunny/"),
        "{body}"
    );
    assert!(cases[0].children().all(|n| !n.has_tag_name("failure")));
}

#[test]
fn iterations_report_pass_at_k_and_pass_hat_k() {
    let dir = cities_project();
    let run = eval(dir.path(), &["--json", "--iterations", "3", "cities"]);
    assert_eq!(run.code, 1);
    let doc = json_of(&run);
    assert_eq!(doc["summary"]["runs"], 6);
    let paris = &doc["cases"][0];
    assert_eq!(
        (
            paris["iterations"].clone(),
            paris["passedIterations"].clone(),
            paris["passAtK"].clone(),
            paris["passHatK"].clone(),
            paris["passRate"].clone()
        ),
        (json!(3), json!(3), json!(1.0), json!(1.0), json!(1.0))
    );
    let iterations: Vec<u64> = paris["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["iteration"].as_u64().unwrap())
        .collect();
    assert_eq!(iterations, [1, 2, 3]);
    let sessions: std::collections::BTreeSet<&str> = paris["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(sessions.len(), 3, "each iteration is its own session");
    let oslo = &doc["cases"][1];
    assert_eq!(
        (oslo["passAtK"].clone(), oslo["passHatK"].clone()),
        (json!(0.0), json!(0.0))
    );
    // `iterations` in the file counts the same way.
    let dir = project(
        "test",
        &[(
            "evals/twice.eval.toml",
            "iterations = 2\nsend = \"hi\"\nexpect = { succeeded = true }\n",
        )],
    );
    let run = eval(dir.path(), &["--json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        json_of(&run)["cases"][0]["runs"].as_array().unwrap().len(),
        2
    );
}

/// The most runs whose [startedAt, endedAt] intervals overlap.
fn max_overlap(doc: &Value) -> usize {
    let mut points: Vec<(i64, i32)> = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        for r in case["runs"].as_array().unwrap() {
            let t = |k: &str| {
                chrono::DateTime::parse_from_rfc3339(r[k].as_str().unwrap())
                    .unwrap()
                    .timestamp_millis()
            };
            points.push((t("startedAt"), 1));
            points.push((t("endedAt"), -1));
        }
    }
    // Ends before starts at the same instant.
    points.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in points {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn concurrency_is_bounded_by_max_concurrency_and_the_flag() {
    let script = r#"{"turns": [{"steps": [{"text": "done", "delayMs": 400}]}]}"#;
    let mut cases = String::new();
    for i in 0..6 {
        cases.push_str(&format!("[[cases]]\nid = \"c{i}\"\nsend = \"go {i}\"\nexpect = {{ reply = {{ contains = \"done\" }} }}\n"));
    }
    let dir = project(
        "scripted:model.json",
        &[
            ("agent/model.json", script),
            ("evals/evals.toml", "max_concurrency = 2\n"),
            ("evals/slow.eval.toml", &cases),
        ],
    );
    let started = Instant::now();
    let run = eval(dir.path(), &["--json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = json_of(&run);
    assert_eq!(doc["concurrency"], 2);
    assert_eq!(max_overlap(&doc), 2, "{doc:#}");
    // Six 400 ms turns two at a time take three rounds at least.
    assert!(started.elapsed() >= Duration::from_millis(1200));
    // The flag lowers the bound, never raises it.
    let run = eval(
        dir.path(),
        &[
            "--json",
            "--concurrency",
            "1",
            "slow/c0",
            "slow/c1",
            "slow/c2",
        ],
    );
    assert_eq!(max_overlap(&json_of(&run)), 1);
    let run = eval(dir.path(), &["--json", "--concurrency", "50"]);
    let doc = json_of(&run);
    assert_eq!(doc["concurrency"], 2);
    assert_eq!(max_overlap(&doc), 2);
}

#[test]
fn file_expectations_read_the_eval_workspace() {
    let script = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "write", "input": {"path": "notes/paris.md", "content": "- Paris: sunny\n"}}]},
        {"text": "Saved."}
    ]}]}"#;
    let evals = r#"
[[cases]]
id = "saves"
send = "Save a note"
workspace_files = { "seed.txt" = "seeded" }
[cases.expect]
called_tool = [{ name = "write", input = { path = "^notes/" } }]
tool_order = ["write"]
[[cases.expect.files]]
path = "notes/paris.md"
contains = "Paris"
matches = "^- "
[[cases.expect.files]]
path = "seed.txt"
contains = "seeded"
[[cases.expect.files]]
path = "missing.txt"
exists = false

[[cases]]
id = "wrong"
send = "Save a note"
[[cases.expect.files]]
path = "notes/paris.md"
contains = "Oslo"
[[cases.expect.files]]
path = "nowhere.md"
"#;
    let dir = project(
        "scripted:model.json",
        &[
            (
                "agent/agent.toml",
                "model = \"scripted:model.json\"\n[harness]\nbuiltin_tools = [\"write\"]\n",
            ),
            ("agent/model.json", script),
            ("evals/notes.eval.toml", evals),
        ],
    );
    let run = eval(dir.path(), &["--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json_of(&run);
    let saves = &doc["cases"][0];
    assert_eq!(saves["outcome"], "passed", "{saves:#}");
    assert_eq!(
        saves["runs"][0]["turns"][0]["checks"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    let wrong = &doc["cases"][1]["runs"][0]["turns"][0]["checks"];
    let messages: Vec<&str> = wrong
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            "expected `notes/paris.md` contains \"Oslo\"; it holds \"- Paris: sunny\"",
            "expected `nowhere.md` exists; it does not",
        ]
    );
}

#[test]
fn judges_grade_replies_with_their_request_and_answer_in_the_report() {
    let judge = r#"{"turns": [{"steps": [{"text": "{\"score\": 0.8, \"reason\": \"it names the city\"}"}]}]}"#;
    let evals = r#"
[[cases]]
id = "kind"
send = "Weather in Paris?"
expect = { reply = { judge = "The reply names the city the user asked about.", model = "scripted:judge.json", threshold = 0.5 } }

[[cases]]
id = "strict"
send = "Weather in Paris?"
[[cases.expect.judge]]
rubric = "The reply gives a temperature in Celsius."
model = "scripted:judge.json"
threshold = 0.9
"#;
    let dir = project(
        "test",
        &[
            ("agent/judge.json", judge),
            ("evals/judged.eval.toml", evals),
        ],
    );
    let run = eval(dir.path(), &["--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json_of(&run);
    let kind = &doc["cases"][0]["runs"][0]["turns"][0]["checks"][0];
    assert_eq!(kind["kind"], "judge");
    assert_eq!(kind["passed"], true, "{kind:#}");
    assert_eq!(kind["seen"], "score 0.8: it names the city");
    let record = &kind["judge"];
    assert_eq!(record["model"], "scripted:judge.json");
    assert_eq!(record["score"], 0.8);
    assert_eq!(record["threshold"], 0.5);
    let prompt = record["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("The reply names the city the user asked about."),
        "{prompt}"
    );
    assert!(
        prompt.contains("You said: Weather in Paris?"),
        "the reply is judged: {prompt}"
    );
    assert!(
        record["answer"]
            .as_str()
            .unwrap()
            .contains("\"score\": 0.8")
    );
    let strict = &doc["cases"][1]["runs"][0]["turns"][0]["checks"][0];
    assert_eq!(strict["passed"], false);
    assert_eq!(
        strict["message"],
        "judge scored 0.8 (needs 0.9): it names the city"
    );
    // A judge whose model answers no score fails, saying so.
    let dir = project(
        "test",
        &[(
            "evals/j.eval.toml",
            "send = \"hi\"\nexpect = { reply = { judge = \"is polite\", model = \"test\" } }\n",
        )],
    );
    let run = eval(dir.path(), &["--json"]);
    assert_eq!(run.code, 1);
    let check = &json_of(&run)["cases"][0]["runs"][0]["turns"][0]["checks"][0];
    assert!(
        check["message"]
            .as_str()
            .unwrap()
            .starts_with("judge: the judge's answer has no score"),
        "{check:#}"
    );
}

#[test]
fn record_then_replay_offline_and_a_changed_request_fails_with_a_diff() {
    let mock = MockProvider::start(vec![
        Reply::Step(Step::text("Paris is sunny.")),
        Reply::Step(Step::text("Oslo is cold.")),
        Reply::Step(Step::text("Paris is sunny.")),
    ]);
    let evals = r#"
[[cases]]
id = "paris"
send = "Weather in Paris?"
expect = { reply = { contains = "Paris" } }
[[cases]]
id = "oslo"
send = "Weather in Oslo?"
expect = { reply = { contains = "cold" } }
"#;
    let dir = project(
        "openai:gpt-mock",
        &[
            ("evals/cities.eval.toml", evals),
            ("evals/evals.toml", "max_concurrency = 1\n"),
        ],
    );
    let run = agentkit_with(
        dir.path(),
        &["eval", "--dir", ".", "--no-stream", "--record", "tape"],
        |c| {
            c.env("OPENAI_BASE_URL", mock.openai_base_url())
                .env("OPENAI_API_KEY", "sk-test");
        },
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(mock.requests().len(), 2);
    let tapes = std::fs::read_dir(dir.path().join("tape")).unwrap().count();
    assert_eq!(tapes, 2);

    // Offline: no key, nothing listening.
    let offline = |c: &mut Command| {
        c.env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .env_remove("OPENAI_API_KEY");
    };
    let run = agentkit_with(
        dir.path(),
        &["eval", "--dir", ".", "--json", "--replay", "tape"],
        offline,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(mock.requests().len(), 2, "replay called the provider");
    let doc = json_of(&run);
    assert_eq!(
        doc["cases"][1]["runs"][0]["turns"][0]["reply"],
        "Oslo is cold."
    );

    // The instructions changed: the recorded requests no longer match.
    std::fs::write(
        dir.path().join("agent/instructions.md"),
        "You answer in haiku.\n",
    )
    .unwrap();
    let run = agentkit_with(
        dir.path(),
        &[
            "eval",
            "--dir",
            ".",
            "--no-stream",
            "--replay",
            "tape",
            "cities/paris",
        ],
        offline,
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("cassette: no recorded exchange in tape matches this request"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("-  \"system\": \"You answer weather questions.\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("+  \"system\": \"You answer in haiku.\""),
        "{}",
        run.stdout
    );

    // A long prompt that changed in one line: that line and a little
    // context, not the whole prompt twice.
    let rules: String = (1..=150)
        .map(|n| format!("- Rule {n}: answer weather questions with care and cite the source.\n"))
        .collect();
    std::fs::write(dir.path().join("agent/instructions.md"), &rules).unwrap();
    let run = agentkit_with(
        dir.path(),
        &[
            "eval",
            "--dir",
            ".",
            "--no-stream",
            "--record",
            "long-tape",
            "cities/paris",
        ],
        |c| {
            c.env("OPENAI_BASE_URL", mock.openai_base_url())
                .env("OPENAI_API_KEY", "sk-test");
        },
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    std::fs::write(
        dir.path().join("agent/instructions.md"),
        rules.replace("Rule 75: answer", "Rule 75: always answer"),
    )
    .unwrap();
    let run = agentkit_with(
        dir.path(),
        &[
            "eval",
            "--dir",
            ".",
            "--no-stream",
            "--replay",
            "long-tape",
            "cities/paris",
        ],
        offline,
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    let changed: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with(['-', '+']) && l.contains("Rule "))
        .collect();
    assert_eq!(
        changed,
        [
            "-    - Rule 75: answer weather questions with care and cite the source.",
            "+    - Rule 75: always answer weather questions with care and cite the source.",
        ],
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches("Rule ").count(), 6, "{}", run.stdout);
    assert!(run.stdout.len() < 2_000, "{}", run.stdout);
}

/// The bundled weather agent runs an A/B experiment (`ab.toml`: half the
/// sessions enrolled, a variant that appends to the instructions). Eval
/// sessions stick to their case and iteration, so a recording of the
/// unchanged project replays on every run. Before, each run enrolled the
/// sessions anew at random and most replays failed.
#[test]
fn replays_of_the_bundled_weather_agent_pass_every_time() {
    let tmp = tempfile::tempdir().unwrap();
    let tape = tmp.path().join("tape");
    let tape = tape.to_str().unwrap();
    let dir = super::fixtures().join("agents/weather-agent");
    let dir = dir.to_str().unwrap();
    let eval = |mode: &str| {
        agentkit(
            tmp.path(),
            &[
                "eval",
                "--dir",
                dir,
                "--model",
                "test",
                "--iterations",
                "3",
                "--json",
                mode,
                tape,
            ],
        )
    };
    let run = eval("--record");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(json_of(&run)["summary"]["runs"], 9);
    for n in 1..=6 {
        let run = eval("--replay");
        assert_eq!(run.code, 0, "replay {n}:\n{}\n{}", run.stdout, run.stderr);
    }
}

#[test]
fn a_baseline_regression_exits_1_and_is_named() {
    let dir = project("test", &[("evals/greet.eval.toml", GREETING)]);
    let run = eval(dir.path(), &["--json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    std::fs::write(dir.path().join("base.json"), &run.stdout).unwrap();
    // Unchanged: no regression.
    let run = eval(dir.path(), &["--no-stream", "--baseline", "base.json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout.contains("no regression against baseline evr_"),
        "{}",
        run.stdout
    );
    // The agent now fails the case.
    std::fs::write(
        dir.path().join("evals/greet.eval.toml"),
        GREETING.replace("^You said: Hello", "^Bonjour"),
    )
    .unwrap();
    let run = eval(dir.path(), &["--no-stream", "--baseline", "base.json"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("REGRESSION `greet` passed in the baseline and fails now"),
        "{}",
        run.stdout
    );
    let run = eval(dir.path(), &["--json", "--baseline", "base.json"]);
    let doc = json_of(&run);
    assert_eq!(doc["baseline"]["regressions"][0]["id"], "greet");
    assert_eq!(doc["baseline"]["regressions"][0]["wasPassRate"], 1.0);
    // A baseline that is not a report is a usage error.
    std::fs::write(dir.path().join("bad.json"), "{}").unwrap();
    let run = eval(dir.path(), &["--baseline", "bad.json"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("baseline `bad.json` is not an eval report"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_weather_agent_evals_pass_on_the_test_model() {
    let run = agentkit(
        &super::fixtures().join("agents"),
        &[
            "eval",
            "--dir",
            "weather-agent",
            "--no-stream",
            "--model",
            "test",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("3 passed, 0 failed"), "{}", run.stdout);
}

fn serve(root: &Path, dev: bool) -> ServerProcess {
    serve_with(root, dev, &["--state-root", "state"])
}

fn serve_with(root: &Path, dev: bool, extra: &[&str]) -> ServerProcess {
    let port = free_port();
    let mut args = vec!["serve", "--dir", "proj", "--port"];
    let port_text = port.to_string();
    args.push(&port_text);
    args.extend(extra);
    if dev {
        args.push("--dev");
    }
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args(&args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

/// Two hosts on one PostgreSQL database: a run started on one is listed
/// and shown, running then completed, on the other; the newest
/// `max_playground_runs` are kept across both.
#[test]
fn dev_eval_runs_are_shared_by_hosts_on_one_database() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let dir = cities_project();
    let root = dir.tmp.path();
    std::fs::write(
        root.join("proj/evals/evals.toml"),
        "max_concurrency = 2\nmax_playground_runs = 2\n",
    )
    .unwrap();
    let a = serve_with(
        root,
        true,
        &["--state-root", "state-a", "--database-url", &db.url],
    );
    let b = serve_with(
        root,
        true,
        &["--state-root", "state-b", "--database-url", &db.url],
    );
    let start = |server: &ServerProcess, body: Value| {
        let r = Request::post("/proj/v1/dev/evals")
            .json(&body)
            .send(server.addr)
            .unwrap();
        assert_eq!(r.status, 202, "{}", r.json());
        r.json()["runId"].as_str().unwrap().to_owned()
    };
    let first = start(&a, json!({"selectors": ["cities"]}));
    // Shown on the other host at once (running or already done), then
    // completed there with the report host A wrote.
    let seen = Request::get(&format!("/proj/v1/dev/evals/{first}"))
        .send(b.addr)
        .unwrap();
    assert_eq!(seen.status, 200, "{}", seen.json());
    assert_eq!(seen.json()["selectors"], json!(["cities"]));
    let doc = wait_done(&b, &first);
    assert_eq!(doc["report"]["runId"], first.as_str());
    assert_eq!(
        doc["report"]["summary"],
        json!({"cases": 2, "passed": 1, "failed": 1, "runs": 2})
    );
    let second = start(&b, json!({"tags": ["smoke"]}));
    wait_done(&a, &second);
    let third = start(&a, json!({"selectors": ["greet"]}));
    wait_done(&b, &third);
    for server in [&a, &b] {
        let list = Request::get("/proj/v1/dev/evals")
            .send(server.addr)
            .unwrap()
            .json();
        let ids: Vec<&str> = list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["runId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [third.as_str(), second.as_str()]);
    }
    let gone = Request::get(&format!("/proj/v1/dev/evals/{first}"))
        .send(b.addr)
        .unwrap();
    assert_eq!(gone.status, 404);
}

fn wait_done(server: &ServerProcess, run_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = Request::get(&format!("/proj/v1/dev/evals/{run_id}"))
            .send(server.addr)
            .unwrap();
        assert_eq!(r.status, 200);
        let doc = r.json();
        if doc["status"] == "completed" {
            return doc;
        }
        assert!(Instant::now() < deadline, "the run did not finish: {doc}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn dev_routes_start_list_and_keep_eval_runs() {
    let dir = cities_project();
    let root = dir.tmp.path();
    std::fs::write(
        root.join("proj/evals/evals.toml"),
        "max_concurrency = 2\npersist_runs = true\nmax_playground_runs = 2\n",
    )
    .unwrap();
    let server = serve(root, true);
    let start = |body: Value| {
        Request::post("/proj/v1/dev/evals")
            .json(&body)
            .send(server.addr)
            .unwrap()
    };
    let r = start(json!({"selectors": ["cities"]}));
    assert_eq!(r.status, 202, "{}", r.json());
    assert_eq!(r.json()["cases"], 2);
    let run_id = r.json()["runId"].as_str().unwrap().to_owned();
    let doc = wait_done(&server, &run_id);
    let report = &doc["report"];
    assert_eq!(report["runId"], run_id.as_str());
    assert_eq!(
        report["summary"],
        json!({"cases": 2, "passed": 1, "failed": 1, "runs": 2})
    );
    // Eval sessions are the caller's, with purpose "eval".
    let session = report["cases"][0]["runs"][0]["sessionId"].as_str().unwrap();
    let meta = Request::get(&format!("/proj/v1/session/{session}"))
        .send(server.addr)
        .unwrap()
        .json();
    assert_eq!(meta["purpose"], "eval", "{meta}");

    // `agentkit eval --url` runs against this server (cassettes are the
    // booted server's business, so they are refused).
    let url = format!("http://{}", server.addr);
    let run = agentkit(
        root,
        &[
            "eval",
            "--dir",
            "proj",
            "--url",
            &url,
            "--json",
            "cities/paris",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(json_of(&run)["summary"]["passed"], 1);
    let run = agentkit(
        root,
        &["eval", "--dir", "proj", "--url", &url, "--replay", "tape"],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);

    let r = start(json!({"tags": ["smoke"]}));
    let second = r.json()["runId"].as_str().unwrap().to_owned();
    wait_done(&server, &second);
    let r = start(json!({"selectors": ["nope"]}));
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), "unknown_selector");
    let r = start(json!({"selectors": ["greet"]}));
    let third = r.json()["runId"].as_str().unwrap().to_owned();
    wait_done(&server, &third);
    // At most max_playground_runs are kept, newest first.
    let list = Request::get("/proj/v1/dev/evals")
        .send(server.addr)
        .unwrap()
        .json();
    let ids: Vec<&str> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [third.as_str(), second.as_str()]);
    drop(server);

    // persist_runs: the runs survive a restart.
    let server = serve(root, true);
    let list = Request::get("/proj/v1/dev/evals")
        .send(server.addr)
        .unwrap()
        .json();
    let ids: Vec<&str> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [third.as_str(), second.as_str()]);
    let gone = Request::get(&format!("/proj/v1/dev/evals/{run_id}"))
        .send(server.addr)
        .unwrap();
    assert_eq!(gone.status, 404);
    drop(server);

    // Not in dev mode: the routes are not served.
    let server = serve(root, false);
    let r = Request::get("/proj/v1/dev/evals")
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 404);
}

#[test]
fn a_turn_over_the_case_timeout_is_stopped_and_fails_its_case() {
    let script = r#"{"turns": [{"steps": [{"text": "late", "delayMs": 5000}]}]}"#;
    let dir = project(
        "scripted:model.json",
        &[
            ("agent/model.json", script),
            (
                "evals/slow.eval.toml",
                "timeout = \"1s\"\nsend = \"hi\"\nexpect = { succeeded = true }\n",
            ),
        ],
    );
    let started = Instant::now();
    let run = eval(dir.path(), &["--no-stream"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("FAIL slow #1"), "{}", run.stdout);
    assert!(
        run.stdout.contains("  - turn 1 timed out after 1s"),
        "{}",
        run.stdout
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the turn was not cut short"
    );
}

/// `agentkit eval --url` posts each iteration's verdict on its session,
/// so `GET /v1/ab` (and `agentkit info --url … --ab`) reports each
/// variant's eval pass rate: exactly the passing runs of its sessions.
#[test]
fn eval_verdicts_become_each_variants_pass_rate() {
    let dir = project(
        "test",
        &[
            ("evals/cities.eval.toml", CITIES),
            (
                "agent/ab.toml",
                "[[variants]]\nid = \"control\"\n[[variants]]\nid = \"other\"\ninstructions_append = \"Be brief.\"\n",
            ),
        ],
    );
    let root = dir.tmp.path();
    let server = serve(root, false);
    let url = format!("http://{}", server.addr);
    let run = agentkit(
        root,
        &[
            "eval",
            "--dir",
            "proj",
            "--url",
            &url,
            "--json",
            "--iterations",
            "6",
            "cities",
        ],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = json_of(&run);
    // What each variant's sessions should add up to, from the report and
    // each session's own `ab.assigned`.
    let mut want = std::collections::BTreeMap::<String, (u64, u64)>::new();
    for case in doc["cases"].as_array().unwrap() {
        for r in case["runs"].as_array().unwrap() {
            let id = r["sessionId"].as_str().unwrap();
            let events = Request::get(&format!("/proj/v1/session/{id}/events"))
                .send(server.addr)
                .unwrap();
            let variant = events
                .body
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .find(|e| e["type"] == "ab.assigned")
                .map(|e| e["data"]["variant"].as_str().unwrap().to_owned())
                .unwrap();
            let entry = want.entry(variant).or_default();
            entry.1 += 1;
            entry.0 += u64::from(r["outcome"] == "passed");
        }
    }
    assert_eq!(want.values().map(|w| w.1).sum::<u64>(), 12, "{want:?}");
    let info = agentkit(
        root,
        &["info", "--url", &url, "--agent", "proj", "--ab", "--json"],
    );
    assert_eq!(info.code, 0, "{}", info.stderr);
    let report = json_of(&info);
    for v in report["experiments"][0]["variants"].as_array().unwrap() {
        let id = v["id"].as_str().unwrap();
        let (passed, total) = want.get(id).copied().unwrap_or_default();
        assert_eq!(v["evalSessions"], total, "{v}");
        if total > 0 {
            assert_eq!(v["eval"]["passed"], passed, "{v}");
            assert_eq!(v["eval"]["total"], total, "{v}");
        }
        // Verdicts are not live feedback.
        assert!(v.get("feedback").is_none(), "{v}");
    }
    // File expectations need the dev routes; a server without them says so.
    std::fs::write(
        root.join("proj/evals/files.eval.toml"),
        "send = \"hi\"\n[[expect.files]]\npath = \"a.txt\"\n",
    )
    .unwrap();
    let files = agentkit(
        root,
        &["eval", "--dir", "proj", "--url", &url, "--json", "files"],
    );
    assert_eq!(files.code, 1, "{}\n{}", files.stdout, files.stderr);
    assert!(
        files.stdout.contains("serve with `--dev`"),
        "{}",
        files.stdout
    );
    let text = agentkit(root, &["info", "--url", &url, "--agent", "proj", "--ab"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("traffic 1 · sticky key · control variant: control · not enrolled 0"),
        "{}",
        text.stdout
    );
    if want.len() == 2 {
        assert!(text.stdout.contains("eval.passRate"), "{}", text.stdout);
    }
}

/// `output_schema` on an eval file (and overridden by a case) reaches the
/// provider as the session's schema, and `[expect.output]` checks the
/// structured output: a value that differs fails the case naming it.
#[test]
fn cases_take_an_output_schema_and_check_the_structured_output() {
    let mock = MockProvider::start(vec![
        Reply::Step(Step::text(r#"{"severity": "high", "service": "db"}"#)),
        Reply::Step(Step::text(r#"{"severity": "low", "service": "web"}"#)),
        Reply::Step(Step::text(r#"{"ok": true}"#)),
    ]);
    let evals = r#"
[output_schema]
type = "object"
required = ["severity", "service"]
[output_schema.properties]
severity = { enum = ["low", "high"] }
service = { type = "string" }

[[cases]]
id = "outage"
send = "The database is down."
expect = { succeeded = true, output = { severity = "high" } }

[[cases]]
id = "typo"
send = "A typo on the pricing page."
expect = { output = { severity = "high", service = "web" } }

[[cases]]
id = "own-schema"
send = "Check."
output_schema = { type = "object", required = ["ok"] }
expect = { output = { ok = true } }
"#;
    let dir = project(
        "openai:gpt-mock",
        &[
            ("evals/triage.eval.toml", evals),
            ("evals/evals.toml", "max_concurrency = 1\n"),
        ],
    );
    let run = agentkit_with(dir.path(), &["eval", "--dir", ".", "--json"], |c| {
        c.env("OPENAI_BASE_URL", mock.openai_base_url())
            .env("OPENAI_API_KEY", "sk-test");
    });
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = json_of(&run);
    let outcome = |i: usize| doc["cases"][i]["outcome"].as_str().unwrap().to_owned();
    assert_eq!(
        (outcome(0), outcome(1), outcome(2)),
        ("passed".into(), "failed".into(), "passed".into()),
        "{doc:#}"
    );
    let typo = &doc["cases"][1]["runs"][0]["turns"][0];
    let check = typo["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "output")
        .unwrap();
    assert_eq!(check["passed"], false);
    assert!(
        check["seen"].as_str().unwrap().contains("\"low\""),
        "{check}"
    );
    let bodies = mock.bodies();
    assert_eq!(
        bodies[0]["response_format"]["json_schema"]["schema"]["required"],
        json!(["severity", "service"])
    );
    assert_eq!(
        bodies[2]["response_format"]["json_schema"]["schema"]["required"],
        json!(["ok"])
    );
}
