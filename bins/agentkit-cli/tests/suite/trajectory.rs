//! `agentkit trajectory`: a saved event log summarised as JSON.

use expect_test::expect;

use super::{agentkit, fixtures};

#[test]
fn weather_turn_log_becomes_a_trajectory() {
    let run = agentkit(
        &fixtures(),
        &["trajectory", "--events", "streams/weather-turn.ndjson"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    expect![[r#"
        {
          "sessionId": "ses_weather01",
          "ok": true,
          "turns": [
            {
              "turnId": "turn_01",
              "messages": [
                "What's the weather in NYC? Give me Celsius."
              ],
              "toolCalls": [
                {
                  "callId": "call_a1",
                  "toolName": "get_weather",
                  "input": {
                    "city": "New York"
                  },
                  "output": {
                    "city": "New York",
                    "condition": "partly cloudy",
                    "temperatureF": 68
                  },
                  "isError": false,
                  "durationMs": 142
                },
                {
                  "callId": "call_b1",
                  "toolName": "convert_units",
                  "input": {
                    "value": 68,
                    "from": "F",
                    "to": "C"
                  },
                  "output": {
                    "value": 20.0,
                    "unit": "C"
                  },
                  "isError": false,
                  "durationMs": 118
                },
                {
                  "callId": "call_b2",
                  "toolName": "post_alert",
                  "input": {
                    "city": "New York",
                    "message": "mild"
                  },
                  "output": "approval required",
                  "isError": true,
                  "durationMs": 0
                }
              ],
              "reply": "It's 20 °C and partly cloudy in New York.",
              "status": "completed",
              "usage": {
                "inputTokens": 1843,
                "outputTokens": 96,
                "cacheReadTokens": 1024,
                "cacheWriteTokens": 0
              },
              "costUsd": null
            }
          ],
          "reply": "It's 20 °C and partly cloudy in New York.",
          "toolCalls": [
            {
              "callId": "call_a1",
              "toolName": "get_weather",
              "input": {
                "city": "New York"
              },
              "output": {
                "city": "New York",
                "condition": "partly cloudy",
                "temperatureF": 68
              },
              "isError": false,
              "durationMs": 142
            },
            {
              "callId": "call_b1",
              "toolName": "convert_units",
              "input": {
                "value": 68,
                "from": "F",
                "to": "C"
              },
              "output": {
                "value": 20.0,
                "unit": "C"
              },
              "isError": false,
              "durationMs": 118
            },
            {
              "callId": "call_b2",
              "toolName": "post_alert",
              "input": {
                "city": "New York",
                "message": "mild"
              },
              "output": "approval required",
              "isError": true,
              "durationMs": 0
            }
          ],
          "usage": {
            "inputTokens": 1843,
            "outputTokens": 96,
            "cacheReadTokens": 1024,
            "cacheWriteTokens": 0
          },
          "costUsd": null
        }
    "#]]
    .assert_eq(&run.stdout);
}

#[test]
fn a_failed_turn_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("failed.ndjson");
    std::fs::write(
        &log,
        concat!(
            r#"{"type":"message.received","index":0,"sessionId":"ses_x","data":{"text":"hi"}}"#,
            "\n",
            r#"{"type":"turn.started","index":1,"sessionId":"ses_x","turnId":"t1","data":{}}"#,
            "\n",
            r#"{"type":"turn.failed","index":2,"sessionId":"ses_x","turnId":"t1","data":{"message":"turn interrupted"}}"#,
            "\n",
        ),
    )
    .unwrap();
    let run = agentkit(dir.path(), &["trajectory", "--events", "failed.ndjson"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["turns"][0]["status"], "failed");
    assert_eq!(doc["turns"][0]["error"], "turn interrupted");
}

#[test]
fn a_bad_line_exits_2_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("bad.ndjson");
    std::fs::write(
        &log,
        "{\"type\":\"session.started\",\"index\":0}\n\n{\"type\": oops}\n",
    )
    .unwrap();
    let run = agentkit(dir.path(), &["trajectory", "--events", "bad.ndjson"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("`bad.ndjson` is not an event log: line 3 is not JSON"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_missing_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let run = agentkit(dir.path(), &["trajectory", "--events", "nope.ndjson"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("cannot read `nope.ndjson`"),
        "{}",
        run.stderr
    );
}
