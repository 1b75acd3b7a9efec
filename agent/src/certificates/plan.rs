//! Planner: pure, no I/O.
//!
//! When to renew a certificate, as client-go's certificate manager decides: at a jittered
//! 70–90 % of its life, at once when there is none, it expired or it no longer says what is
//! wanted (a serving certificate's addresses changed), and after failures only once a capped
//! exponential back-off has passed.

use jiff::{SignedDuration, Timestamp};

/// The first wait after a failed renewal; doubled per further failure up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: SignedDuration = SignedDuration::from_secs(2);
/// The longest wait between two renewal attempts.
pub const MAX_BACKOFF: SignedDuration = SignedDuration::from_secs(128);
/// The longest the manager sleeps before it looks again, whatever the deadline: a host that
/// was suspended (monotonic sleeps stop with it) still renews within this much of waking.
pub const RECHECK: SignedDuration = SignedDuration::from_secs(3600);

/// A certificate's validity period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

impl Validity {
    /// Whole seconds until it expires, negative once it has (the kubelet's TTL gauges).
    pub fn ttl_seconds(&self, now: Timestamp) -> f64 {
        self.not_after.duration_since(now).as_secs() as f64
    }
}

/// The time to renew a certificate: `not_before + life × (0.7 + 0.2 × jitter)`, `jitter` in
/// [0, 1) drawn once per certificate, so a fleet issued together does not renew together.
/// Worked example: a 2-minute certificate (120 s) valid from 12:00:00, jitter 0.5, is renewed
/// at 12:00:00 + 120 s × 0.8 = 12:01:36; jitter 0 gives 12:01:24, jitter → 1 gives 12:01:48.
pub fn rotation_deadline(v: &Validity, jitter: f64) -> Timestamp {
    let life = v.not_after.duration_since(v.not_before);
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    let into = SignedDuration::try_from_secs_f64(life.as_secs_f64().max(0.0) * fraction)
        .unwrap_or(SignedDuration::ZERO);
    v.not_before.saturating_add(into).unwrap_or(v.not_before)
}

/// The certificate in use, as the manager sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    pub validity: Validity,
    /// Its [`rotation_deadline`], fixed when it was taken into use.
    pub deadline: Timestamp,
    /// Whether it still says what a new request would ask for (subject, addresses).
    pub matches_template: bool,
}

/// What the manager knows when it plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observed {
    /// `None`: no certificate of this kind yet (a serving certificate not yet issued).
    pub current: Option<Current>,
    /// Renewal attempts that failed in a row.
    pub failures: u32,
    /// When the last of them failed.
    pub last_failure: Option<Timestamp>,
}

/// Why a certificate is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// There is none.
    Missing,
    /// It has expired (the agent was down through its renewal time, or renewals failed).
    Expired,
    /// Its renewal time has come.
    Deadline,
    /// It no longer names what is wanted.
    TemplateChanged,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Why::Missing => "no certificate yet",
            Why::Expired => "the certificate expired",
            Why::Deadline => "the certificate reached its renewal time",
            Why::TemplateChanged => "the certificate no longer names what is wanted",
        })
    }
}

/// The next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Keep the certificate; look again at `until`.
    Keep { until: Timestamp },
    /// Request a new certificate now.
    Renew { why: Why },
    /// A renewal is due but the last one failed: try again at `until`.
    BackOff { until: Timestamp, why: Why },
}

/// The wait after `failures` failures in a row: 2 s, 4 s, 8 s … capped at 128 s.
pub fn backoff(failures: u32) -> SignedDuration {
    let doublings = failures.saturating_sub(1).min(16);
    let wait = FIRST_BACKOFF
        .checked_mul(1i32 << doublings)
        .unwrap_or(MAX_BACKOFF);
    wait.min(MAX_BACKOFF)
}

/// The next step for the certificate of one kind.
pub fn plan(o: &Observed, now: Timestamp) -> Plan {
    let why = match &o.current {
        None => Some(Why::Missing),
        Some(c) if now >= c.validity.not_after => Some(Why::Expired),
        Some(c) if !c.matches_template => Some(Why::TemplateChanged),
        Some(c) if now >= c.deadline => Some(Why::Deadline),
        Some(c) => {
            let recheck = now.saturating_add(RECHECK).unwrap_or(c.deadline);
            return Plan::Keep {
                until: c.deadline.min(recheck),
            };
        }
    };
    let why = why.unwrap_or(Why::Missing);
    match o.last_failure {
        Some(at) if o.failures > 0 => {
            let until = at.saturating_add(backoff(o.failures)).unwrap_or(at);
            if now < until {
                Plan::BackOff { until, why }
            } else {
                Plan::Renew { why }
            }
        }
        _ => Plan::Renew { why },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn validity(from: i64, to: i64) -> Validity {
        Validity {
            not_before: t(from),
            not_after: t(to),
        }
    }

    #[test]
    fn the_deadline_falls_between_70_and_90_percent_of_the_life() {
        let v = validity(0, 120);
        let cases = [
            (0.0, 84),
            (0.5, 96),
            (0.999_999, 108),
            (-3.0, 84),
            (7.0, 108),
        ];
        for (jitter, at) in cases {
            let got = rotation_deadline(&v, jitter);
            let want = t(at);
            let off = got.duration_since(want).as_secs_f64().abs();
            assert!(off < 0.01, "jitter {jitter}: {got} is not {want}");
        }
        // A year-long certificate: between day 255.5 and day 328.5.
        let year = validity(0, 365 * 86_400);
        let d = rotation_deadline(&year, 0.25);
        assert_eq!(d, t((365.0 * 86_400.0 * 0.75) as i64));
    }

    #[test]
    fn a_degenerate_validity_renews_at_its_start() {
        assert_eq!(rotation_deadline(&validity(10, 10), 0.5), t(10));
        assert_eq!(rotation_deadline(&validity(10, 5), 0.5), t(10));
    }

    #[test]
    fn backoff_doubles_from_two_seconds_to_a_cap() {
        let secs: Vec<i64> = [0, 1, 2, 3, 7, 8, 30, u32::MAX]
            .iter()
            .map(|f| backoff(*f).as_secs())
            .collect();
        assert_eq!(secs, vec![2, 2, 4, 8, 128, 128, 128, 128]);
    }

    fn have(v: Validity, deadline: i64, matches: bool) -> Option<Current> {
        Some(Current {
            validity: v,
            deadline: t(deadline),
            matches_template: matches,
        })
    }

    #[test]
    fn the_plan_follows_the_certificate_and_the_failures() {
        use Why::*;
        // A certificate valid for 0..120 s whose deadline is at 96 s.
        let holding = |matches| Observed {
            current: have(validity(0, 120), 96, matches),
            ..Default::default()
        };
        let failed = |failures, at| Observed {
            failures,
            last_failure: Some(t(at)),
            ..holding(true)
        };
        let keep = |until| Plan::Keep { until: t(until) };
        let renew = |why| Plan::Renew { why };
        let back_off = |until| Plan::BackOff {
            until: t(until),
            why: Deadline,
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, Observed, i64, Plan)> = vec![
            ("none yet: renew", Observed::default(), 0, renew(Missing)),
            ("fresh: keep until the deadline", holding(true), 10, keep(96)),
            ("deadline reached", holding(true), 96, renew(Deadline)),
            ("expired", holding(true), 120, renew(Expired)),
            ("addresses changed: renew early", holding(false), 5, renew(TemplateChanged)),
            ("failed twice 1 s ago: wait out the 2nd back-off (4 s)", failed(2, 99), 100, back_off(103)),
            ("failed twice, back-off over: try again", failed(2, 99), 103, renew(Deadline)),
            ("failures before the deadline do not renew early", failed(1, 9), 10, keep(96)),
        ];
        for (name, observed, now, want) in cases {
            assert_eq!(plan(&observed, t(now)), want, "{name}");
        }
    }

    #[test]
    fn a_far_deadline_is_looked_at_again_within_the_hour() {
        let year = validity(0, 365 * 86_400);
        let o = Observed {
            current: have(year, 300 * 86_400, true),
            ..Default::default()
        };
        assert_eq!(plan(&o, t(0)), Plan::Keep { until: t(3600) });
    }

    #[test]
    fn ttl_is_negative_once_expired() {
        let v = validity(0, 120);
        assert_eq!(v.ttl_seconds(t(20)), 100.0);
        assert_eq!(v.ttl_seconds(t(130)), -10.0);
    }
}
