//! Which thresholds are met, as the kubelet's eviction manager judges them each interval: a
//! threshold is met when its signal's available amount is below its quantity; one met before
//! stays met until the available amount is back above quantity + minimum reclaim; the node's
//! pressure conditions follow every met threshold (grace periods ignored) and stay for the
//! transition period; pods are evicted only for thresholds met for their grace period (at
//! once for hard ones). Memory is reclaimed before anything else.
//!
//! Planner: pure, no I/O.

use super::config::Threshold;
use crate::node::pressure::{Observed, Pressure, Pressures, Signal};
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;

/// What each signal showed.
pub type Observations = BTreeMap<Signal, Observed>;

/// What the manager remembers between intervals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Thresholds met (grace periods satisfied) and not yet resolved.
    met: Vec<Threshold>,
    /// When each currently met threshold was first seen met.
    first_observed: Vec<(Threshold, Timestamp)>,
    /// When each pressure was last seen.
    last_observed: BTreeMap<Pressure, Timestamp>,
}

/// One interval's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub pressures: Pressures,
    /// Thresholds to act on now, memory first.
    pub to_reclaim: Vec<Threshold>,
}

/// The threshold's floor for the observation, with the minimum reclaim when `with_reclaim`.
fn floor(t: &Threshold, o: &Observed, with_reclaim: bool) -> i64 {
    let mut q = t.limit.quantity(o.capacity);
    if with_reclaim && let Some(r) = t.min_reclaim {
        q = q.saturating_add(r.quantity(o.capacity));
    }
    q
}

/// The thresholds met by `observed` (`with_reclaim`: relative to quantity + minimum reclaim).
pub fn met(
    thresholds: &[Threshold],
    observed: &Observations,
    with_reclaim: bool,
) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            observed
                .get(&t.signal)
                .is_some_and(|o| o.available < floor(t, o, with_reclaim))
        })
        .copied()
        .collect()
}

/// How many bytes (or inodes, pids) must be freed for `t` to be resolved.
pub fn shortfall(t: &Threshold, o: &Observed) -> i64 {
    floor(t, o, true).saturating_sub(o.available).max(0)
}

impl State {
    /// Judges one interval's observations at `now`.
    pub fn judge(
        &mut self,
        thresholds: &[Threshold],
        observed: &Observations,
        transition: SignedDuration,
        now: Timestamp,
    ) -> Verdict {
        let mut current = met(thresholds, observed, false);
        for t in met(&self.met, observed, true) {
            if !current.contains(&t) {
                current.push(t);
            }
        }
        self.first_observed = current
            .iter()
            .map(|t| {
                let since = self
                    .first_observed
                    .iter()
                    .find(|(k, _)| k == t)
                    .map_or(now, |(_, at)| *at);
                (*t, since)
            })
            .collect();
        for t in &current {
            self.last_observed.insert(t.signal.condition(), now);
        }
        let on = |p: Pressure| {
            self.last_observed
                .get(&p)
                .is_some_and(|at| now.duration_since(*at) < transition)
        };
        let pressures = Pressures {
            memory: on(Pressure::Memory),
            disk: on(Pressure::Disk),
            pid: on(Pressure::Pid),
        };
        let mut due: Vec<Threshold> = self
            .first_observed
            .iter()
            .filter(|(t, since)| now.duration_since(*since) >= t.grace)
            .map(|(t, _)| *t)
            .collect();
        self.met = due.clone();
        // Memory first; the rest keep their order (a stable sort).
        due.sort_by_key(|t| t.signal.condition() != Pressure::Memory);
        Verdict {
            pressures,
            to_reclaim: due,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::config::{join, parse_grace_periods, parse_minimum_reclaims};
    use crate::node::pressure::{Limit, Thresholds};

    const MI: i64 = 1 << 20;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn obs(pairs: &[(Signal, i64)]) -> Observations {
        pairs
            .iter()
            .map(|(s, a)| {
                (
                    *s,
                    Observed {
                        available: *a,
                        capacity: 1000 * MI,
                    },
                )
            })
            .collect()
    }

    fn thresholds(hard: &str, soft: &str, grace: &str, reclaim: &str) -> Vec<Threshold> {
        join(
            &Thresholds::parse(hard).unwrap(),
            &Thresholds::parse(soft).unwrap(),
            &parse_grace_periods(grace).unwrap(),
            &parse_minimum_reclaims(reclaim).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn a_hard_threshold_acts_at_once_and_a_soft_one_after_its_grace_period() {
        let t = thresholds(
            "memory.available<100Mi",
            "nodefs.available<300Mi",
            "nodefs.available=30s",
            "",
        );
        let five = SignedDuration::from_mins(5);
        let mut s = State::default();
        type Case = (&'static str, i64, (i64, i64), (bool, bool), Vec<Signal>);
        // Each row: what happens, the second, the memory and disk available (Mi), the memory
        // and disk pressure expected, the signals to reclaim.
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("plenty", 0, (500, 500), (false, false), vec![]),
            ("disk under its soft threshold: pressure, no eviction yet", 10, (500, 200), (false, true), vec![]),
            ("29 s later: still waiting", 39, (500, 200), (false, true), vec![]),
            ("memory crosses its hard threshold: acted on first", 40, (50, 200), (true, true), vec![Signal::MemoryAvailable, Signal::NodeFsAvailable]),
            ("both recover: the conditions stay for the transition period", 50, (500, 500), (true, true), vec![]),
            ("five minutes after they were last met they clear", 340, (500, 500), (false, false), vec![]),
        ];
        for (name, when, (memory_mi, disk_mi), pressures, want) in cases {
            let o = [
                (Signal::MemoryAvailable, memory_mi * MI),
                (Signal::NodeFsAvailable, disk_mi * MI),
            ];
            let v = s.judge(&t, &obs(&o), five, at(when));
            let got = (v.pressures.memory, v.pressures.disk);
            assert_eq!(got, pressures, "{name}");
            let got: Vec<Signal> = v.to_reclaim.iter().map(|t| t.signal).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn a_met_threshold_stays_met_until_the_minimum_reclaim_is_freed() {
        let t = thresholds("memory.available<100Mi", "", "", "memory.available=50Mi");
        let mut s = State::default();
        let p = SignedDuration::from_secs(1);
        let m = |a| obs(&[(Signal::MemoryAvailable, a)]);
        assert_eq!(s.judge(&t, &m(90 * MI), p, at(0)).to_reclaim.len(), 1);
        assert_eq!(
            s.judge(&t, &m(120 * MI), p, at(10)).to_reclaim.len(),
            1,
            "above 100Mi, below 150Mi"
        );
        assert!(s.judge(&t, &m(151 * MI), p, at(20)).to_reclaim.is_empty());
        assert!(
            s.judge(&t, &m(120 * MI), p, at(30)).to_reclaim.is_empty(),
            "resolved: only the threshold itself counts again"
        );
    }

    #[test]
    fn the_shortfall_includes_the_minimum_reclaim() {
        let t = Threshold {
            signal: Signal::NodeFsAvailable,
            limit: Limit::Fraction(0.1),
            grace: SignedDuration::ZERO,
            min_reclaim: Some(Limit::Quantity(10 * MI)),
        };
        let o = Observed {
            available: 60 * MI,
            capacity: 1000 * MI,
        };
        assert_eq!(shortfall(&t, &o), 50 * MI);
        let plenty = Observed {
            available: 500 * MI,
            capacity: 1000 * MI,
        };
        assert_eq!(shortfall(&t, &plenty), 0);
    }
}
