//! What a model step costs: the prices of the models the harness knows
//! (the families whose windows `context.rs` knows), `[model.pricing]`
//! over them, and the usage a provider counted turned into US dollars.
//!
//! A model with no known price costs `None`, never 0: a reader must be
//! able to tell "free" from "unknown".

use agentkit_manifest::{ModelSpec, Pricing, Provider};
use agentkit_protocol::Usage;

/// Published prices in US dollars per million tokens, by model id prefix
/// (the longest matching prefix wins): input, output, cache read, cache
/// write. The sources and dates are in `docs/reference/pricing.md`.
const KNOWN: &[(Provider, &str, [f64; 4])] = &[
    // OpenAI charges nothing extra to write its cache.
    (Provider::Openai, "gpt-4.1", [2.00, 8.00, 0.50, 2.00]),
    (Provider::Openai, "gpt-4.1-mini", [0.40, 1.60, 0.10, 0.40]),
    (Provider::Openai, "gpt-4.1-nano", [0.10, 0.40, 0.025, 0.10]),
    (Provider::Openai, "gpt-4o", [2.50, 10.00, 1.25, 2.50]),
    (Provider::Openai, "gpt-4o-mini", [0.15, 0.60, 0.075, 0.15]),
    (Provider::Openai, "gpt-5", [1.25, 10.00, 0.125, 1.25]),
    (Provider::Openai, "gpt-5-mini", [0.25, 2.00, 0.025, 0.25]),
    (Provider::Openai, "gpt-5-nano", [0.05, 0.40, 0.005, 0.05]),
    (Provider::Openai, "o3", [2.00, 8.00, 0.50, 2.00]),
    (Provider::Openai, "o3-mini", [1.10, 4.40, 0.55, 1.10]),
    (Provider::Openai, "o3-pro", [20.00, 80.00, 20.00, 20.00]),
    (Provider::Openai, "o4-mini", [1.10, 4.40, 0.275, 1.10]),
    // Anthropic: cache writes at the 5-minute rate (1.25 × input).
    (
        Provider::Anthropic,
        "claude-opus-4",
        [15.00, 75.00, 1.50, 18.75],
    ),
    (
        Provider::Anthropic,
        "claude-opus-4-5",
        [5.00, 25.00, 0.50, 6.25],
    ),
    (
        Provider::Anthropic,
        "claude-sonnet-4",
        [3.00, 15.00, 0.30, 3.75],
    ),
    (
        Provider::Anthropic,
        "claude-3-7-sonnet",
        [3.00, 15.00, 0.30, 3.75],
    ),
    (
        Provider::Anthropic,
        "claude-3-5-sonnet",
        [3.00, 15.00, 0.30, 3.75],
    ),
    (
        Provider::Anthropic,
        "claude-haiku-4-5",
        [1.00, 5.00, 0.10, 1.25],
    ),
    (
        Provider::Anthropic,
        "claude-3-5-haiku",
        [0.80, 4.00, 0.08, 1.00],
    ),
    (
        Provider::Anthropic,
        "claude-3-haiku",
        [0.25, 1.25, 0.03, 0.30],
    ),
    (
        Provider::Anthropic,
        "claude-3-opus",
        [15.00, 75.00, 1.50, 18.75],
    ),
];

/// The prices of `spec`: its `[model.pricing]`, else the built-in
/// table's, else `None`.
pub fn price(spec: &ModelSpec) -> Option<Pricing> {
    if let Some(p) = spec.pricing {
        return Some(p);
    }
    KNOWN
        .iter()
        .filter(|(p, prefix, _)| *p == spec.provider && spec.id.starts_with(prefix))
        .max_by_key(|(_, prefix, _)| prefix.len())
        .map(|(_, _, [input, output, cache_read, cache_write])| Pricing {
            input: *input,
            output: *output,
            cache_read: *cache_read,
            cache_write: *cache_write,
        })
}

/// What `usage` costs at `pricing`, in US dollars (rounded to a
/// billionth). OpenAI counts cached tokens inside its input tokens;
/// Anthropic counts them apart.
pub fn cost_of(provider: Provider, pricing: &Pricing, usage: &Usage) -> f64 {
    let uncached = match provider {
        Provider::Anthropic => usage.input_tokens,
        _ => usage.input_tokens.saturating_sub(usage.cache_read_tokens),
    };
    let micro = uncached as f64 * pricing.input
        + usage.output_tokens as f64 * pricing.output
        + usage.cache_read_tokens as f64 * pricing.cache_read
        + usage.cache_write_tokens as f64 * pricing.cache_write;
    round(micro / 1_000_000.0)
}

/// What `usage` of model `spec` costs, `None` when its price is unknown.
pub fn cost(spec: &ModelSpec, usage: &Usage) -> Option<f64> {
    price(spec).map(|p| cost_of(spec.provider, &p, usage))
}

/// The sum of two costs: unknown when either is.
pub fn add_cost(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(round(a? + b?))
}

/// Rounded to a billionth of a dollar, so sums print plainly.
pub fn round(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn spec(provider: Provider, id: &str) -> ModelSpec {
        let mut s = agentkit_manifest::parse_model_string("test").unwrap();
        s.provider = provider;
        s.id = id.to_owned();
        s
    }

    #[test]
    fn longest_prefix_wins_and_unknown_is_none() {
        let mini = price(&spec(Provider::Openai, "gpt-4.1-mini-2025-04-14")).unwrap();
        assert_eq!((mini.input, mini.output), (0.40, 1.60));
        let opus = price(&spec(Provider::Anthropic, "claude-opus-4-5-20251101")).unwrap();
        assert_eq!(opus.input, 5.00);
        let opus41 = price(&spec(Provider::Anthropic, "claude-opus-4-1")).unwrap();
        assert_eq!(opus41.input, 15.00);
        assert_eq!(price(&spec(Provider::Openai, "llama3")), None);
        assert_eq!(cost(&spec(Provider::Test, ""), &Usage::default()), None);
    }

    #[test]
    fn cache_tokens_are_priced_per_provider() {
        let p = Pricing {
            input: 2.0,
            output: 10.0,
            cache_read: 0.5,
            cache_write: 4.0,
        };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 400_000,
            cache_write_tokens: 0,
        };
        // OpenAI: 600k uncached × 2 + 400k cached × 0.5 + 100k × 10.
        assert_eq!(cost_of(Provider::Openai, &p, &usage), 1.2 + 0.2 + 1.0);
        let usage = Usage {
            cache_write_tokens: 250_000,
            ..usage
        };
        // Anthropic: 1M × 2 + 400k × 0.5 + 250k × 4 + 100k × 10.
        assert_eq!(
            cost_of(Provider::Anthropic, &p, &usage),
            2.0 + 0.2 + 1.0 + 1.0
        );
        let mut own = spec(Provider::Openai, "llama3");
        own.pricing = Some(p);
        assert_eq!(cost(&own, &Usage::default()), Some(0.0));
        assert_eq!(add_cost(Some(0.1), None), None);
        assert_eq!(add_cost(Some(0.1), Some(0.2)), Some(0.3));
    }
}
