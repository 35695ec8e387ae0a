//! LLM judges: a model grades a reply against a rubric and answers a
//! score from 0 to 1 with a reason. The request and the answer are kept
//! in the check's result.

use std::path::Path;

use agentkit_harness::ProviderConfig;
use agentkit_manifest::{Judge, ModelSpec};
use serde_json::Value;

use crate::expect::{excerpt, result};
use crate::report::{CheckResult, JudgeRecord};

/// What a judge is told about its job.
pub const JUDGE_SYSTEM: &str = "You are an impartial evaluator of an AI assistant's reply. \
Grade the reply against the rubric. Answer with one JSON object and nothing else: \
{\"score\": <a number from 0 to 1>, \"reason\": \"<one sentence>\"}.";

/// The judge's message: the rubric and the exchange.
pub fn judge_prompt(rubric: &str, message: &str, reply: &str) -> String {
    format!(
        "Rubric:\n{}\n\nThe user said:\n{}\n\nThe assistant replied:\n{}",
        rubric.trim(),
        message.trim(),
        reply.trim()
    )
}

/// Asks `model` (the judge's own, else `default`) to grade `reply`.
pub async fn run_judge(
    judge: &Judge,
    default: Option<&ModelSpec>,
    dir: &Path,
    providers: &ProviderConfig,
    message: &str,
    reply: &str,
) -> CheckResult {
    let threshold = judge.threshold();
    let expected = format!(
        "a judge scores the reply at least {threshold} for: {}",
        excerpt(&judge.rubric)
    );
    let spec = match &judge.model {
        Some(s) => agentkit_manifest::parse_model_string(s).map_err(|(m, _)| m),
        None => default.cloned().ok_or_else(|| {
            "no judge model: set `model` on the judge or run with --model".to_owned()
        }),
    };
    let prompt = judge_prompt(&judge.rubric, message, reply);
    let mut record = JudgeRecord {
        model: judge
            .model
            .clone()
            .unwrap_or_else(|| default.map(model_label).unwrap_or_default()),
        system: JUDGE_SYSTEM.to_owned(),
        prompt: prompt.clone(),
        answer: None,
        score: None,
        reason: None,
        threshold,
    };
    let fail = |record: JudgeRecord, why: String| {
        let mut r = result(
            "judge",
            false,
            expected.clone(),
            why.clone(),
            format!("judge: {why}"),
        );
        r.judge = Some(record);
        r
    };
    let spec = match spec {
        Ok(spec) => spec,
        Err(e) => return fail(record, e),
    };
    record.model = model_label(&spec);
    let answer =
        match agentkit_harness::complete(&spec, dir, JUDGE_SYSTEM, &prompt, providers).await {
            Ok(c) => c.text,
            Err(e) => return fail(record, format!("the judge's model failed: {e}")),
        };
    record.answer = Some(answer.clone());
    let Some((score, reason)) = parse_verdict(&answer) else {
        return fail(
            record,
            format!("the judge's answer has no score: {:?}", excerpt(&answer)),
        );
    };
    record.score = Some(score);
    record.reason = reason.clone();
    let reason = reason.unwrap_or_default();
    let seen = format!("score {score}: {reason}");
    let mut r = result(
        "judge",
        score >= threshold,
        expected.clone(),
        seen.clone(),
        format!("judge scored {score} (needs {threshold}): {reason}"),
    );
    r.judge = Some(record);
    r
}

/// `provider:model` as a user writes it.
pub fn model_label(spec: &ModelSpec) -> String {
    let provider = serde_json::to_value(spec.provider)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    if spec.id.is_empty() {
        provider
    } else {
        format!("{provider}:{}", spec.id)
    }
}

/// The score (0 to 1) and reason of a judge's answer: the first JSON
/// object in it with a numeric `score`.
pub fn parse_verdict(answer: &str) -> Option<(f64, Option<String>)> {
    let mut rest = answer;
    while let Some(start) = rest.find('{') {
        let candidate = &rest[start..];
        let mut stream = serde_json::Deserializer::from_str(candidate).into_iter::<Value>();
        if let Some(Ok(doc)) = stream.next()
            && let Some(score) = doc.get("score").and_then(Value::as_f64)
            && (0.0..=1.0).contains(&score)
        {
            let reason = doc.get("reason").and_then(Value::as_str).map(str::to_owned);
            return Some((score, reason));
        }
        rest = &candidate[1..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_the_first_scored_object() {
        assert_eq!(
            parse_verdict("Sure. {\"score\": 0.8, \"reason\": \"names Paris\"} done"),
            Some((0.8, Some("names Paris".into())))
        );
        assert_eq!(
            parse_verdict("{\"x\": 1} {\"score\": 1}"),
            Some((1.0, None))
        );
        assert_eq!(parse_verdict("{\"score\": 7}"), None);
        assert_eq!(parse_verdict("You said: grade this"), None);
    }
}
