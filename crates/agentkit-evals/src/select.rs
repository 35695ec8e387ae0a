//! Which cases a run covers: selectors (a case id, a file id, or a folder
//! of files) and tags.

use agentkit_manifest::{EvalCase, Evals};
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The cases of `evals` that `selectors` name (all when there are none)
/// and that carry one of `tags` (any, when there are none), in file order.
/// A selector that names nothing is an error naming it, and nothing runs.
pub fn select<'a>(
    evals: &'a Evals,
    selectors: &[String],
    tags: &[String],
) -> Result<Vec<&'a EvalCase>> {
    let all: Vec<(&str, &EvalCase)> = evals
        .files
        .iter()
        .flat_map(|f| f.cases.iter().map(move |c| (f.id.as_str(), c)))
        .collect();
    let matches = |selector: &str, file: &str, case: &EvalCase| {
        let selector = selector.trim_end_matches('/');
        case.id == selector || file == selector || case.id.starts_with(&format!("{selector}/"))
    };
    let unknown: Vec<String> = selectors
        .iter()
        .filter(|s| !all.iter().any(|(file, case)| matches(s, file, case)))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        let mut known: Vec<String> = evals.files.iter().map(|f| f.id.clone()).collect();
        known.extend(all.iter().map(|(_, c)| c.id.clone()));
        known.sort();
        known.dedup();
        return Err(Error::UnknownSelectors {
            selectors: unknown,
            known,
        });
    }
    Ok(all
        .into_iter()
        .filter(|(file, case)| {
            selectors.is_empty() || selectors.iter().any(|s| matches(s, file, case))
        })
        .filter(|(_, case)| tags.is_empty() || case.tags.iter().any(|t| tags.contains(t)))
        .map(|(_, case)| case)
        .collect())
}

/// `agentkit eval --list --json`: the selected cases, without running any.
pub fn list_json(agent: &str, cases: &[&EvalCase]) -> Value {
    json!({
        "agent": agent,
        "cases": cases
            .iter()
            .map(|c| json!({
                "id": c.id,
                "description": c.description,
                "tags": c.tags,
                "iterations": c.iterations,
                "turns": c.turns.len(),
            }))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use agentkit_manifest::{EvalFile, EvalTurn};

    use super::*;

    fn case(id: &str, tags: &[&str]) -> EvalCase {
        EvalCase {
            id: id.into(),
            description: None,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            timeout: None,
            iterations: 1,
            dry_run: None,
            output_schema: None,
            turns: vec![EvalTurn {
                send: "hi".into(),
                workspace_files: Default::default(),
                approvals: Vec::new(),
                expect: Default::default(),
            }],
        }
    }

    fn evals() -> Evals {
        Evals {
            config: None,
            files: vec![
                EvalFile {
                    id: "cities".into(),
                    path: "evals/cities.eval.toml".into(),
                    cases: vec![
                        case("cities/paris", &["weather"]),
                        case("cities/oslo", &["cold"]),
                    ],
                },
                EvalFile {
                    id: "weather/nyc".into(),
                    path: "evals/weather/nyc.eval.toml".into(),
                    cases: vec![case("weather/nyc", &["smoke"])],
                },
            ],
        }
    }

    fn ids(selectors: &[&str], tags: &[&str]) -> Result<Vec<String>> {
        let e = evals();
        let s: Vec<String> = selectors.iter().map(|s| s.to_string()).collect();
        let t: Vec<String> = tags.iter().map(|s| s.to_string()).collect();
        Ok(select(&e, &s, &t)?.iter().map(|c| c.id.clone()).collect())
    }

    #[test]
    fn selectors_name_cases_files_and_folders() -> Result<()> {
        assert_eq!(
            ids(&[], &[])?,
            ["cities/paris", "cities/oslo", "weather/nyc"]
        );
        assert_eq!(ids(&["cities/oslo"], &[])?, ["cities/oslo"]);
        assert_eq!(ids(&["cities"], &[])?, ["cities/paris", "cities/oslo"]);
        assert_eq!(ids(&["weather"], &[])?, ["weather/nyc"]);
        assert_eq!(
            ids(&["weather/nyc", "cities/paris"], &[])?,
            ["cities/paris", "weather/nyc"]
        );
        assert_eq!(
            ids(&[], &["cold", "smoke"])?,
            ["cities/oslo", "weather/nyc"]
        );
        assert_eq!(ids(&["cities"], &["smoke"])?, Vec::<String>::new());
        Ok(())
    }

    #[test]
    fn unknown_selectors_are_named() {
        let err = ids(&["cities", "citys/paris", "nope"], &[])
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "no eval matches `citys/paris`, `nope`; known ids: cities, cities/oslo, cities/paris, weather/nyc"
            )
        );
    }
}
