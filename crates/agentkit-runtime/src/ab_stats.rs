//! The statistics of an A/B report: running moments of a sample, the
//! nearest-rank percentile, and 95 % confidence intervals for the
//! difference between two variants: Welch's interval for means (feedback
//! scores, latencies) and the Agresti–Caffo interval for proportions
//! (failure and eval pass rates). Both use the normal quantile 1.96, so
//! they are approximate for small samples; the report says how many
//! observations each side had.

/// The two-sided 95 % normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// Count, sum and sum of squares of a sample (what SQL's `COUNT`, `SUM`
/// give without reading the rows twice).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Moments {
    pub(crate) n: u64,
    pub(crate) sum: f64,
    pub(crate) sum_sq: f64,
}

impl Moments {
    pub(crate) fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// The unbiased sample variance (`None` below two observations).
    pub(crate) fn variance(&self) -> Option<f64> {
        if self.n < 2 {
            return None;
        }
        let n = self.n as f64;
        let mean = self.sum / n;
        // Clamped: rounding can make a constant sample's variance -1e-17.
        Some(((self.sum_sq - n * mean * mean) / (n - 1.0)).max(0.0))
    }
}

/// A 95 % interval for `b - a`, and whether it excludes zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interval {
    pub(crate) difference: f64,
    pub(crate) low: f64,
    pub(crate) high: f64,
}

impl Interval {
    pub(crate) fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// Welch's interval for the difference of two means, `b - a`. `None`
/// when either side has fewer than two observations.
pub(crate) fn mean_difference(a: &Moments, b: &Moments) -> Option<Interval> {
    let (ma, mb) = (a.mean()?, b.mean()?);
    let se = (a.variance()? / a.n as f64 + b.variance()? / b.n as f64).sqrt();
    let difference = mb - ma;
    Some(Interval {
        difference,
        low: difference - Z95 * se,
        high: difference + Z95 * se,
    })
}

/// The Agresti–Caffo interval for the difference of two proportions,
/// `b - a` (`successes / trials` each): one success and one failure added
/// to each side, which keeps it honest at 0 % and 100 %. `None` when a
/// side has no trials. The reported difference is the raw one.
pub(crate) fn proportion_difference(a: (u64, u64), b: (u64, u64)) -> Option<Interval> {
    let ((sa, na), (sb, nb)) = (a, b);
    if na == 0 || nb == 0 {
        return None;
    }
    let adjusted = |s: u64, n: u64| (s as f64 + 1.0) / (n as f64 + 2.0);
    let (pa, pb) = (adjusted(sa, na), adjusted(sb, nb));
    let se = (pa * (1.0 - pa) / (na as f64 + 2.0) + pb * (1.0 - pb) / (nb as f64 + 2.0)).sqrt();
    let centre = pb - pa;
    Some(Interval {
        difference: sb as f64 / nb as f64 - sa as f64 / na as f64,
        low: (centre - Z95 * se).max(-1.0),
        high: (centre + Z95 * se).min(1.0),
    })
}

/// The nearest-rank index (0-based) of percentile `p` (0–100) in a sorted
/// sample of `n` values.
pub(crate) fn rank(p: f64, n: u64) -> Option<u64> {
    (n > 0).then(|| ((p / 100.0 * n as f64).ceil() as u64).clamp(1, n) - 1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn moments(xs: &[f64]) -> Moments {
        Moments {
            n: xs.len() as u64,
            sum: xs.iter().sum(),
            sum_sq: xs.iter().map(|x| x * x).sum(),
        }
    }

    #[test]
    fn moments_give_the_sample_mean_and_variance() {
        let m = moments(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m.mean(), Some(5.0));
        // Population variance 4; the unbiased one is 32 / 7.
        assert!((m.variance().unwrap() - 32.0 / 7.0).abs() < 1e-12);
        assert_eq!(moments(&[3.0]).variance(), None);
        assert_eq!(moments(&[]).mean(), None);
        assert_eq!(moments(&[0.1, 0.1, 0.1]).variance(), Some(0.0));
    }

    #[test]
    fn welch_interval_matches_a_hand_computation() {
        // a: mean 3, variance 2.5 (n 5); b: mean 5, variance 2.5 (n 5).
        let a = moments(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        let b = moments(&[3.0, 4.0, 5.0, 6.0, 7.0]);
        let i = mean_difference(&a, &b).unwrap();
        let se = (2.5f64 / 5.0 + 2.5 / 5.0).sqrt();
        assert!((i.difference - 2.0).abs() < 1e-12);
        assert!((i.low - (2.0 - Z95 * se)).abs() < 1e-12);
        assert!((i.high - (2.0 + Z95 * se)).abs() < 1e-12);
        assert!(i.excludes_zero(), "{i:?}");
        // Identical samples: an interval around zero.
        let same = mean_difference(&a, &a).unwrap();
        assert!(!same.excludes_zero());
        assert_eq!(mean_difference(&moments(&[1.0]), &b), None);
    }

    #[test]
    fn agresti_caffo_interval_matches_a_hand_computation() {
        // 10/100 against 30/100: adjusted 11/102 and 31/102.
        let i = proportion_difference((10, 100), (30, 100)).unwrap();
        let (pa, pb) = (11.0 / 102.0, 31.0 / 102.0);
        let se = ((pa * (1.0 - pa) + pb * (1.0 - pb)) / 102.0f64).sqrt();
        assert!((i.difference - 0.2).abs() < 1e-12);
        assert!((i.low - (pb - pa - Z95 * se)).abs() < 1e-12);
        assert!((i.high - (pb - pa + Z95 * se)).abs() < 1e-12);
        assert!(i.excludes_zero());
        // Small samples at the extremes stay inside [-1, 1] and wide.
        let tiny = proportion_difference((0, 3), (3, 3)).unwrap();
        assert!(tiny.low > -1.0 && tiny.high <= 1.0);
        assert_eq!(tiny.difference, 1.0);
        assert_eq!(proportion_difference((0, 0), (1, 2)), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(rank(50.0, 10), Some(4));
        assert_eq!(rank(95.0, 10), Some(9));
        assert_eq!(rank(95.0, 100), Some(94));
        assert_eq!(rank(50.0, 1), Some(0));
        assert_eq!(rank(0.0, 5), Some(0));
        assert_eq!(rank(50.0, 0), None);
    }
}
