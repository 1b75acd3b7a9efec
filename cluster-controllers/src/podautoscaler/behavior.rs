//! From a recommendation to the replicas to set, as upstream's
//! `normalizeDesiredReplicasWithBehaviors`: stabilization windows over recent recommendations
//! (the lowest of the scale-up window, the highest of the scale-down window), then the scaling
//! policies' rate limits over the scale events of their periods, then `minReplicas` and
//! `maxReplicas` — with the reasons upstream writes into the `AbleToScale` and `ScalingLimited`
//! conditions.
//!
//! Planner: pure, no I/O.

use jiff::{SignedDuration, Timestamp};

/// How a rule's policies combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    Max,
    Min,
    Disabled,
}

/// One scaling policy: at most `value` pods, or `value` percent, per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Pods { value: i32, period_seconds: i64 },
    Percent { value: i32, period_seconds: i64 },
}

impl Policy {
    fn period_seconds(&self) -> i64 {
        match self {
            Policy::Pods { period_seconds, .. } | Policy::Percent { period_seconds, .. } => {
                *period_seconds
            }
        }
    }
}

/// `behavior.scaleUp` or `behavior.scaleDown`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    pub stabilization_window_seconds: i64,
    pub select: Select,
    pub policies: Vec<Policy>,
}

impl Rules {
    /// Upstream's default scale-up: no window; 4 pods or 100% per 15 s, whichever is more.
    pub fn default_up() -> Rules {
        Rules {
            stabilization_window_seconds: 0,
            select: Select::Max,
            policies: vec![
                Policy::Pods {
                    value: 4,
                    period_seconds: 15,
                },
                Policy::Percent {
                    value: 100,
                    period_seconds: 15,
                },
            ],
        }
    }

    /// Upstream's default scale-down: a 300 s window; 100% per 15 s.
    pub fn default_down() -> Rules {
        Rules {
            stabilization_window_seconds: 300,
            select: Select::Max,
            policies: vec![Policy::Percent {
                value: 100,
                period_seconds: 15,
            }],
        }
    }
}

/// A past recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recommended {
    pub replicas: i32,
    pub at: Timestamp,
}

/// A past rescale by `change` replicas (positive for up, the count removed for down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleEvent {
    pub change: i32,
    pub at: Timestamp,
}

/// Everything one normalization reads.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    pub current: i32,
    pub desired: i32,
    pub min: i32,
    pub max: i32,
    pub up: &'a Rules,
    pub down: &'a Rules,
    pub recommendations: &'a [Recommended],
    pub up_events: &'a [ScaleEvent],
    pub down_events: &'a [ScaleEvent],
    pub now: Timestamp,
}

/// A condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub reason: &'static str,
    pub message: &'static str,
}

/// The outcome: the replicas to have, what the two conditions say, and the recommendation
/// history to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    pub replicas: i32,
    /// `AbleToScale` (True) reason and message.
    pub able_to_scale: Said,
    /// `ScalingLimited`: True when the rate or the bounds cut the stabilized recommendation.
    pub limited: bool,
    pub limited_said: Said,
    pub recommendations: Vec<Recommended>,
}

fn within(at: Timestamp, now: Timestamp, seconds: i64) -> bool {
    at > now - SignedDuration::from_secs(seconds)
}

/// The replicas changed by the events within the last `seconds`.
fn changed_within(events: &[ScaleEvent], now: Timestamp, seconds: i64) -> i32 {
    events
        .iter()
        .filter(|e| within(e.at, now, seconds))
        .map(|e| e.change)
        .sum()
}

/// Which way a scaling rule bounds the replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// The bound the rules of `dir` allow now: the most replicas going up, the fewest going down.
/// Each policy proposes from the replicas at the start of its period (`current`, less what
/// was added and plus what was removed since): `start ± value` pods, or
/// `start × (1 ± value/100)`, rounded up going up and down going down (4 pods at 50%: 6 up, 2
/// down). `Max` picks the proposal that moves furthest, `Min` the one that moves least.
fn scale_limit(a: &Args, dir: Direction) -> i32 {
    let rules = match dir {
        Direction::Up => a.up,
        Direction::Down => a.down,
    };
    let furthest = match rules.select {
        Select::Disabled => return a.current,
        Select::Max => true,
        Select::Min => false,
    };
    let (mut result, pick): (i64, fn(i64, i64) -> i64) = if furthest == (dir == Direction::Up) {
        (i64::from(i32::MIN), i64::max)
    } else {
        (i64::from(i32::MAX), i64::min)
    };
    for p in &rules.policies {
        let added = changed_within(a.up_events, a.now, p.period_seconds());
        let removed = changed_within(a.down_events, a.now, p.period_seconds());
        let start = i64::from(a.current - added + removed);
        let proposed = match (p, dir) {
            (Policy::Pods { value, .. }, Direction::Up) => start + i64::from(*value),
            (Policy::Pods { value, .. }, Direction::Down) => start - i64::from(*value),
            (Policy::Percent { value, .. }, Direction::Up) => {
                (start as f64 * (1.0 + f64::from(*value) / 100.0)).ceil() as i64
            }
            (Policy::Percent { value, .. }, Direction::Down) => {
                (start as f64 * (1.0 - f64::from(*value) / 100.0)) as i64
            }
        };
        result = pick(result, proposed);
    }
    result.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

const WITHIN_RANGE: Said = Said {
    reason: "DesiredWithinRange",
    message: "the desired count is within the acceptable range",
};

/// The replicas to set for recommendation `a.desired`.
pub fn normalize(a: &Args) -> Normalized {
    // Stabilize: no higher than the lowest recommendation of the scale-up window, no lower
    // than the highest of the scale-down window.
    let (mut up, mut down) = (a.desired, a.desired);
    let mut stale = None;
    for (i, r) in a.recommendations.iter().enumerate() {
        let in_up = within(r.at, a.now, a.up.stabilization_window_seconds);
        let in_down = within(r.at, a.now, a.down.stabilization_window_seconds);
        if in_up {
            up = up.min(r.replicas);
        }
        if in_down {
            down = down.max(r.replicas);
        }
        if !in_up && !in_down {
            stale = Some(i);
        }
    }
    let stabilized = a.current.max(up).min(down);
    let mut recommendations = a.recommendations.to_vec();
    let fresh = Recommended {
        replicas: a.desired,
        at: a.now,
    };
    match stale {
        Some(i) => recommendations[i] = fresh,
        None => recommendations.push(fresh),
    }
    let able_to_scale = if stabilized != a.desired {
        if a.desired >= a.current {
            Said {
                reason: "ScaleUpStabilized",
                message: "recent recommendations were lower than current one, applying the lowest recent recommendation",
            }
        } else {
            Said {
                reason: "ScaleDownStabilized",
                message: "recent recommendations were higher than current one, applying the highest recent recommendation",
            }
        }
    } else {
        Said {
            reason: "ReadyForNewScale",
            message: "recommended size matches current size",
        }
    };
    // Rate limits and bounds.
    let (replicas, said) = if stabilized > a.current {
        let limit = scale_limit(a, Direction::Up).max(a.current);
        let (allowed, said) = if a.max > limit {
            (
                limit,
                Said {
                    reason: "ScaleUpLimit",
                    message: "the desired replica count is increasing faster than the maximum scale rate",
                },
            )
        } else {
            (
                a.max,
                Said {
                    reason: "TooManyReplicas",
                    message: "the desired replica count is more than the maximum replica count",
                },
            )
        };
        if stabilized > allowed {
            (allowed, said)
        } else {
            (stabilized, WITHIN_RANGE)
        }
    } else if stabilized < a.current {
        let limit = scale_limit(a, Direction::Down).min(a.current);
        let (allowed, said) = if a.min < limit {
            (
                limit,
                Said {
                    reason: "ScaleDownLimit",
                    message: "the desired replica count is decreasing faster than the maximum scale rate",
                },
            )
        } else {
            (
                a.min,
                Said {
                    reason: "TooFewReplicas",
                    message: "the desired replica count is less than the minimum replica count",
                },
            )
        };
        if stabilized < allowed {
            (allowed, said)
        } else {
            (stabilized, WITHIN_RANGE)
        }
    } else {
        (stabilized, WITHIN_RANGE)
    };
    Normalized {
        replicas,
        able_to_scale,
        limited: replicas != stabilized,
        limited_said: said,
        recommendations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_time::at;

    fn args<'a>(
        current: i32,
        desired: i32,
        up: &'a Rules,
        down: &'a Rules,
        recs: &'a [Recommended],
        ups: &'a [ScaleEvent],
    ) -> Args<'a> {
        Args {
            current,
            desired,
            min: 2,
            max: 10,
            up,
            down,
            recommendations: recs,
            up_events: ups,
            down_events: &[],
            now: at(1000),
        }
    }

    /// A case: name, current, desired, past scale-ups, replicas and reason wanted, limited.
    type UpCase = (
        &'static str,
        i32,
        i32,
        Vec<ScaleEvent>,
        i32,
        &'static str,
        bool,
    );

    fn rec(replicas: i32, ago: i64) -> Recommended {
        Recommended {
            replicas,
            at: at(1000 - ago),
        }
    }

    #[test]
    fn the_scale_down_window_keeps_the_highest_recent_recommendation() {
        let (up, down) = (Rules::default_up(), Rules::default_down());
        let cases: Vec<(&str, Vec<Recommended>, i32, &str)> = vec![
            (
                "a 5 a minute ago holds 5 down",
                vec![rec(5, 60)],
                5,
                "ScaleDownStabilized",
            ),
            (
                "older than 300 s it no longer counts",
                vec![rec(5, 301)],
                2,
                "ReadyForNewScale",
            ),
            (
                "the highest in the window wins",
                vec![rec(4, 200), rec(5, 100), rec(3, 10)],
                5,
                "ScaleDownStabilized",
            ),
        ];
        for (name, recs, want, reason) in cases {
            let n = normalize(&args(5, 2, &up, &down, &recs, &[]));
            assert_eq!(n.replicas, want, "{name}");
            assert_eq!(n.able_to_scale.reason, reason, "{name}");
        }
    }

    #[test]
    fn the_default_scale_up_adds_four_pods_or_doubles_per_fifteen_seconds() {
        let (up, down) = (Rules::default_up(), Rules::default_down());
        let cases: Vec<UpCase> = vec![
            (
                "2 → 10 wanted: 2 + 4 = 6 beats doubling",
                2,
                10,
                vec![],
                6,
                "ScaleUpLimit",
                true,
            ),
            (
                "5 → 10 wanted: doubling reaches 10",
                5,
                10,
                vec![],
                10,
                "DesiredWithinRange",
                false,
            ),
            (
                "5 → 40 wanted: max 10",
                5,
                40,
                vec![],
                10,
                "TooManyReplicas",
                true,
            ),
            (
                "4 added 5 s ago count against the period: from 2, at most 6",
                6,
                10,
                vec![ScaleEvent {
                    change: 4,
                    at: at(995),
                }],
                6,
                "ScaleUpLimit",
                true,
            ),
            (
                "events older than the period do not count",
                6,
                10,
                vec![ScaleEvent {
                    change: 4,
                    at: at(980),
                }],
                10,
                "DesiredWithinRange",
                false,
            ),
        ];
        for (name, current, desired, events, want, reason, limited) in cases {
            let n = normalize(&args(current, desired, &up, &down, &[], &events));
            assert_eq!(n.replicas, want, "{name}");
            assert_eq!(n.limited_said.reason, reason, "{name}");
            assert_eq!(n.limited, limited, "{name}");
        }
    }

    #[test]
    fn scale_down_policies_bound_the_step_and_min_the_floor() {
        let up = Rules::default_up();
        let one_pod = Rules {
            stabilization_window_seconds: 0,
            select: Select::Max,
            policies: vec![Policy::Pods {
                value: 1,
                period_seconds: 60,
            }],
        };
        let n = normalize(&args(5, 2, &up, &one_pod, &[], &[]));
        assert_eq!((n.replicas, n.limited_said.reason), (4, "ScaleDownLimit"));
        let all = Rules {
            stabilization_window_seconds: 0,
            ..Rules::default_down()
        };
        let n = normalize(&args(5, 1, &up, &all, &[], &[]));
        assert_eq!((n.replicas, n.limited_said.reason), (2, "TooFewReplicas"));
        let disabled = Rules {
            select: Select::Disabled,
            ..all.clone()
        };
        let n = normalize(&args(5, 2, &up, &disabled, &[], &[]));
        assert_eq!(n.replicas, 5, "a disabled direction does not move");
    }

    #[test]
    fn a_recommendation_replaces_a_stale_one_outside_both_windows_or_is_added() {
        let (up, down) = (Rules::default_up(), Rules::default_down());
        let recs = [rec(3, 400), rec(4, 100)];
        let n = normalize(&args(4, 4, &up, &down, &recs, &[]));
        assert_eq!(n.recommendations, vec![rec(4, 0), rec(4, 100)]);
        let n = normalize(&args(4, 4, &up, &down, &[rec(4, 100)], &[]));
        assert_eq!(n.recommendations.len(), 2);
    }
}
