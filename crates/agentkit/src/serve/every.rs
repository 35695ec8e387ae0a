//! A rate limit for log lines the host may hit thousands of times a
//! second (a refused accept, a full volume).

use std::time::{Duration, Instant};

/// A rate limit for a log line: due at most once per period, counting the
/// times it was not.
#[derive(Debug)]
pub(crate) struct Every {
    period: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Every {
    pub(crate) const fn new(period: Duration) -> Every {
        Every {
            period,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(times suppressed since the last one)` when the line is due.
    pub(crate) fn due(&mut self) -> Option<u64> {
        let now = Instant::now();
        match self.last {
            Some(last) if now.duration_since(last) < self.period => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limited_line_is_due_once_per_period_and_counts_the_rest() {
        let mut every = Every::new(Duration::from_secs(3600));
        assert_eq!(every.due(), Some(0));
        assert_eq!(every.due(), None);
        assert_eq!(every.due(), None);
        every.last = Some(Instant::now() - Duration::from_secs(7200));
        assert_eq!(every.due(), Some(2));
    }
}
