//! Planner: pure, no I/O.
//!
//! When a certificate is renewed, as client-go's certificate manager times it: at a jittered
//! 70–90% of its life (`notBefore + (notAfter − notBefore) × (0.7 + 0.2 × jitter)`, jitter
//! uniform in [0, 1)), so many holders issued at once do not renew at once. Worked example: a
//! certificate valid 00:00–10:00 with jitter 0.5 renews at 08:00; with jitter 0 at 07:00.
//! Also how much a new certificate is backdated (clock skew between hosts): five minutes,
//! as upstream's signer, or 1% of a lifetime shorter than 8 h (a 2-minute certificate starts
//! 1.2 s early, not 5 minutes, which would put it past 70% of its life at once).

use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// The instant to renew a certificate valid from `not_before` to `not_after`.
pub fn deadline(not_before: Timestamp, not_after: Timestamp, jitter: f64) -> Timestamp {
    let jitter = jitter.clamp(0.0, 1.0);
    let total = not_after.duration_since(not_before);
    let at = total.mul_f64(0.7 + 0.2 * jitter);
    not_before.checked_add(at).unwrap_or(not_after)
}

/// Whether `now` is past `fraction` of the life from `not_before` to `not_after`.
pub fn past(not_before: Timestamp, not_after: Timestamp, now: Timestamp, fraction: f64) -> bool {
    let total = not_after.duration_since(not_before);
    let at = not_before
        .checked_add(total.mul_f64(fraction))
        .unwrap_or(not_after);
    now >= at
}

/// How long before "now" a certificate living `lifetime` starts.
pub fn backdate(lifetime: Duration) -> Duration {
    const FULL: Duration = Duration::from_secs(300);
    const SHORT: Duration = Duration::from_secs(8 * 3600);
    if lifetime >= SHORT {
        FULL
    } else {
        lifetime / 100
    }
}

/// How long from `now` until `at` (zero when past).
pub fn until(now: Timestamp, at: Timestamp) -> Duration {
    let d: SignedDuration = at.duration_since(now);
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn renewal_falls_between_seventy_and_ninety_percent_of_the_life() {
        let (from, to) = (t("2025-01-01T00:00:00Z"), t("2025-01-01T10:00:00Z"));
        assert_eq!(deadline(from, to, 0.0), t("2025-01-01T07:00:00Z"));
        assert_eq!(deadline(from, to, 0.5), t("2025-01-01T08:00:00Z"));
        assert_eq!(
            deadline(from, to, 0.999_999),
            t("2025-01-01T08:59:59.9928Z")
        );
        assert_eq!(deadline(from, to, 7.0), t("2025-01-01T09:00:00Z"));
    }

    #[test]
    fn a_certificate_is_past_seventy_percent_or_not() {
        let (from, to) = (t("2025-01-01T00:00:00Z"), t("2025-01-01T10:00:00Z"));
        assert!(!past(from, to, t("2025-01-01T06:59:59Z"), 0.7));
        assert!(past(from, to, t("2025-01-01T07:00:00Z"), 0.7));
        assert!(past(from, to, t("2025-01-02T00:00:00Z"), 0.7));
    }

    #[test]
    fn short_certificates_are_backdated_by_one_percent() {
        assert_eq!(
            backdate(Duration::from_secs(120)),
            Duration::from_millis(1200)
        );
        assert_eq!(
            backdate(Duration::from_secs(365 * 86400)),
            Duration::from_secs(300)
        );
        let now = t("2025-01-01T00:00:00Z");
        assert_eq!(
            until(now, t("2025-01-01T00:00:10Z")),
            Duration::from_secs(10)
        );
        assert_eq!(until(now, t("2024-01-01T00:00:00Z")), Duration::ZERO);
    }
}
