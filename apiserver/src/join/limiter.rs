//! Rate limiting of failed joins per source address: after [`MAX_FAILURES`] refused attempts
//! within [`WINDOW`], every further attempt from that address is answered 429 until the oldest
//! of them leaves the window. Time is an input (`now`), so the rule is tested without waiting.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Refused attempts allowed per source address within [`WINDOW`].
pub const MAX_FAILURES: usize = 10;
/// The sliding window failures are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked before stale ones are swept (bounds memory under a spray of sources).
const SWEEP_ABOVE: usize = 4096;

/// Failure times per source address.
#[derive(Debug, Default)]
pub struct FailureLimiter {
    failures: HashMap<IpAddr, VecDeque<Instant>>,
}

impl FailureLimiter {
    /// `Err(retry_after)` when `source` has used up its failures.
    pub fn check(&mut self, source: IpAddr, now: Instant) -> Result<(), Duration> {
        let Some(times) = self.failures.get_mut(&source) else {
            return Ok(());
        };
        while times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            times.pop_front();
        }
        match times.front() {
            Some(oldest) if times.len() >= MAX_FAILURES => {
                Err(WINDOW.saturating_sub(now.saturating_duration_since(*oldest)))
            }
            Some(_) => Ok(()),
            None => {
                self.failures.remove(&source);
                Ok(())
            }
        }
    }

    /// Counts a refused attempt from `source`.
    pub fn record_failure(&mut self, source: IpAddr, now: Instant) {
        if self.failures.len() >= SWEEP_ABOVE {
            self.failures.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < WINDOW)
            });
        }
        let times = self.failures.entry(source).or_default();
        times.push_back(now);
        // Only the newest MAX_FAILURES matter for the decision.
        while times.len() > MAX_FAILURES {
            times.pop_front();
        }
    }
}

/// `Retry-After` in whole seconds, rounded up (never 0: "now" would invite a busy retry).
pub fn retry_after_secs(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A limiter that let `n` attempts from 10.0.0.7 through, `every` seconds apart from the
    /// start (returned with the source), and recorded each as a failure.
    fn failing(n: u64, every: u64) -> (FailureLimiter, Instant, IpAddr) {
        let mut l = FailureLimiter::default();
        let t0 = Instant::now();
        let a = ip("10.0.0.7");
        for i in 0..n {
            let now = t0 + Duration::from_secs(every * i);
            assert_eq!(l.check(a, now), Ok(()), "attempt {i}");
            l.record_failure(a, now);
        }
        (l, t0, a)
    }

    #[test]
    fn ten_failures_in_a_minute_block_the_source_until_the_oldest_expires() {
        let (mut l, t0, a) = failing(MAX_FAILURES as u64, 1);
        // The 11th attempt, 10 s after the first failure: 50 s to wait.
        assert_eq!(
            l.check(a, t0 + Duration::from_secs(10)),
            Err(Duration::from_secs(50))
        );
        // Another source is not affected.
        assert_eq!(
            l.check(ip("10.0.0.8"), t0 + Duration::from_secs(10)),
            Ok(())
        );
        // Once the first failure is a minute old, one more attempt is allowed.
        assert_eq!(l.check(a, t0 + Duration::from_secs(60)), Ok(()));
    }

    #[test]
    fn failures_spread_over_more_than_a_minute_never_block() {
        failing(100, 7);
    }

    #[test]
    fn stale_sources_are_swept_when_many_are_tracked() {
        let mut l = FailureLimiter::default();
        let t0 = Instant::now();
        for i in 0..SWEEP_ABOVE as u32 {
            l.record_failure(IpAddr::from(i.to_be_bytes()), t0);
        }
        l.record_failure(ip("10.0.0.7"), t0 + WINDOW);
        assert_eq!(l.failures.len(), 1);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(49_001)), 50);
        assert_eq!(retry_after_secs(Duration::from_secs(50)), 50);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
