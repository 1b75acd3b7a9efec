//! The eviction manager's settings, from the kubelet's flags: `--eviction-hard` (parsed by
//! [`Thresholds`]), `--eviction-soft` with `--eviction-soft-grace-period`,
//! `--eviction-minimum-reclaim`, `--eviction-max-pod-grace-period`,
//! `--eviction-pressure-transition-period` and `--housekeeping-interval`, joined into one list
//! of [`Threshold`]s as upstream's `ParseThresholdConfig` does: a soft threshold without a
//! grace period is refused, a minimum reclaim applies to the hard and the soft threshold of
//! its signal. Pods' memory is enforced through the `kubepods` cgroup (upstream's
//! `--enforce-node-allocatable=pods`, the default and Berth's only mode), so each hard
//! `memory.available` threshold gets an `allocatableMemory.available` twin
//! ([`add_allocatable_thresholds`]).
//!
//! Planner: pure, no I/O.

use crate::node::pressure::{Limit, Signal, Thresholds};
use berth_api::quantity::Quantity;
use jiff::SignedDuration;
use std::collections::BTreeMap;
use std::time::Duration;

/// The kubelet's default `--eviction-pressure-transition-period`.
pub const DEFAULT_TRANSITION_PERIOD: &str = "5m";
/// The kubelet's default `--housekeeping-interval` (the eviction manager's monitoring interval).
pub const DEFAULT_HOUSEKEEPING_INTERVAL: &str = "10s";

/// One eviction threshold: a signal's floor, how long it must be crossed before pods are
/// evicted for it (zero: a hard threshold), and what must be reclaimed beyond it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub limit: Limit,
    /// Zero for a hard threshold.
    pub grace: SignedDuration,
    pub min_reclaim: Option<Limit>,
}

impl Threshold {
    pub fn is_hard(&self) -> bool {
        self.grace.is_zero()
    }
}

/// Everything the eviction manager is told at start.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub thresholds: Vec<Threshold>,
    /// `--eviction-max-pod-grace-period`, seconds (soft evictions; 0 by default as upstream).
    pub max_pod_grace_seconds: i64,
    /// `--eviction-pressure-transition-period`.
    pub transition_period: SignedDuration,
    /// `--housekeeping-interval`.
    pub interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        let hard =
            Thresholds::parse(crate::node::pressure::DEFAULT_EVICTION_HARD).unwrap_or_default();
        Settings {
            thresholds: add_allocatable_thresholds(
                join(
                    &hard,
                    &Thresholds::default(),
                    &BTreeMap::new(),
                    &BTreeMap::new(),
                )
                .unwrap_or_default(),
            ),
            max_pod_grace_seconds: 0,
            transition_period: SignedDuration::from_mins(5),
            interval: Duration::from_secs(10),
        }
    }
}

/// Joins hard and soft thresholds with their grace periods and minimum reclaims.
pub fn join(
    hard: &Thresholds,
    soft: &Thresholds,
    grace: &BTreeMap<Signal, SignedDuration>,
    min_reclaim: &BTreeMap<Signal, Limit>,
) -> Result<Vec<Threshold>, String> {
    let mut out: Vec<Threshold> = hard
        .0
        .iter()
        .map(|(signal, limit)| Threshold {
            signal: *signal,
            limit: *limit,
            grace: SignedDuration::ZERO,
            min_reclaim: min_reclaim.get(signal).copied(),
        })
        .collect();
    for (signal, limit) in &soft.0 {
        let Some(period) = grace.get(signal).filter(|g| g.is_positive()) else {
            return Err(format!(
                "grace period must be specified for the soft eviction threshold {}",
                signal.as_str()
            ));
        };
        out.push(Threshold {
            signal: *signal,
            limit: *limit,
            grace: *period,
            min_reclaim: min_reclaim.get(signal).copied(),
        });
    }
    Ok(out)
}

/// Adds, for each hard `memory.available` threshold, the same threshold (value and minimum
/// reclaim) on `allocatableMemory.available`, as upstream's `addAllocatableThresholds` does
/// when `--enforce-node-allocatable` includes `pods`: pods are then judged against their own
/// share of memory (`kubepods`), whatever the node's other processes use.
pub fn add_allocatable_thresholds(mut thresholds: Vec<Threshold>) -> Vec<Threshold> {
    let twins: Vec<Threshold> = thresholds
        .iter()
        .filter(|t| t.signal == Signal::MemoryAvailable && t.is_hard())
        .map(|t| Threshold {
            signal: Signal::AllocatableMemoryAvailable,
            ..*t
        })
        .collect();
    for t in twins {
        if !thresholds.contains(&t) {
            thresholds.push(t);
        }
    }
    thresholds
}

/// Splits `signal=value,signal=value` (the kubelet's map flags).
fn map_statements(s: &str) -> Result<Vec<(Signal, &str)>, String> {
    let mut out: Vec<(Signal, &str)> = Vec::new();
    for statement in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = statement
            .split_once('=')
            .ok_or_else(|| format!("invalid statement {statement:?}: want signal=value"))?;
        let signal = Signal::parse(name.trim())
            .ok_or_else(|| format!("unsupported eviction signal {}", name.trim()))?;
        if out.iter().any(|(s, _)| *s == signal) {
            return Err(format!("duplicate value for signal {}", name.trim()));
        }
        out.push((signal, value.trim()));
    }
    Ok(out)
}

/// A Go duration (`1m30s`, `90s`, `500ms`, `2h`).
pub fn parse_duration(s: &str) -> Result<SignedDuration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(SignedDuration::ZERO);
    }
    let d: SignedDuration = s
        .parse()
        .map_err(|e| format!("invalid duration {s:?}: {e}"))?;
    if d.is_negative() {
        return Err(format!("duration {s:?} must not be negative"));
    }
    Ok(d)
}

/// `--eviction-soft-grace-period`: `memory.available=1m30s,nodefs.available=2m`.
pub fn parse_grace_periods(s: &str) -> Result<BTreeMap<Signal, SignedDuration>, String> {
    map_statements(s)?
        .into_iter()
        .map(|(signal, v)| {
            let d = parse_duration(v)?;
            Ok((signal, d))
        })
        .collect()
}

/// `--eviction-minimum-reclaim`: `memory.available=0Mi,nodefs.available=500Mi,imagefs.available=2%`.
pub fn parse_minimum_reclaims(s: &str) -> Result<BTreeMap<Signal, Limit>, String> {
    map_statements(s)?
        .into_iter()
        .map(|(signal, v)| {
            let limit = if let Some(pct) = v.strip_suffix('%') {
                let p: f64 = pct
                    .parse()
                    .map_err(|_| format!("invalid minimum reclaim {v:?}"))?;
                if !(0.0..=100.0).contains(&p) {
                    return Err(format!("minimum reclaim {v:?} must be between 0% and 100%"));
                }
                Limit::Fraction(p / 100.0)
            } else {
                let q = Quantity::parse(v)
                    .map_err(|e| format!("invalid minimum reclaim {v:?}: {e}"))?;
                if q.is_negative() {
                    return Err(format!("minimum reclaim {v:?} must not be negative"));
                }
                Limit::Quantity(q.value())
            };
            Ok((signal, limit))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        for (s, secs) in [
            ("1m30s", 90),
            ("90s", 90),
            ("2m", 120),
            ("1h", 3600),
            ("0", 0),
        ] {
            assert_eq!(
                parse_duration(s),
                Ok(SignedDuration::from_secs(secs)),
                "{s}"
            );
        }
        assert_eq!(
            parse_duration("500ms"),
            Ok(SignedDuration::from_millis(500))
        );
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn soft_thresholds_need_a_grace_period_and_take_the_minimum_reclaim() {
        let hard = Thresholds::parse("memory.available<100Mi").unwrap();
        let soft = Thresholds::parse("memory.available<300Mi,nodefs.available<15%").unwrap();
        let grace = parse_grace_periods("memory.available=1m30s").unwrap();
        assert!(
            join(&hard, &soft, &grace, &BTreeMap::new())
                .unwrap_err()
                .contains("nodefs.available")
        );
        let grace = parse_grace_periods("memory.available=1m30s,nodefs.available=2m").unwrap();
        let reclaim = parse_minimum_reclaims("memory.available=50Mi,nodefs.available=1%").unwrap();
        let all = join(&hard, &soft, &grace, &reclaim).unwrap();
        assert_eq!(all.len(), 3);
        assert!(all[0].is_hard());
        assert_eq!(all[0].min_reclaim, Some(Limit::Quantity(50 << 20)));
        assert_eq!(all[1].grace, SignedDuration::from_secs(90));
        assert_eq!(all[2].min_reclaim, Some(Limit::Fraction(0.01)));
    }

    #[test]
    fn each_hard_memory_threshold_gets_an_allocatable_twin_with_its_minimum_reclaim() {
        let hard = Thresholds::parse("memory.available<500Mi,nodefs.available<10%").unwrap();
        let soft = Thresholds::parse("memory.available<1Gi").unwrap();
        let grace = parse_grace_periods("memory.available=1m").unwrap();
        let reclaim = parse_minimum_reclaims("memory.available=100Mi").unwrap();
        let all = add_allocatable_thresholds(join(&hard, &soft, &grace, &reclaim).unwrap());
        let twins: Vec<&Threshold> = all
            .iter()
            .filter(|t| t.signal == Signal::AllocatableMemoryAvailable)
            .collect();
        // The soft memory threshold gets none, as upstream's.
        assert_eq!(
            twins,
            [&Threshold {
                signal: Signal::AllocatableMemoryAvailable,
                limit: Limit::Quantity(500 << 20),
                grace: SignedDuration::ZERO,
                min_reclaim: Some(Limit::Quantity(100 << 20)),
            }]
        );
        assert_eq!(all.len(), 4);
        // Without a memory threshold there is nothing to copy, and adding twice adds once.
        let disk = join(
            &Thresholds::parse("nodefs.available<10%").unwrap(),
            &Thresholds::default(),
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(add_allocatable_thresholds(disk.clone()), disk);
        assert_eq!(add_allocatable_thresholds(all.clone()), all);
    }

    #[test]
    fn malformed_map_flags_are_refused() {
        assert!(parse_grace_periods("memory.available").is_err());
        assert!(parse_grace_periods("cpu=1m").is_err());
        assert!(parse_minimum_reclaims("memory.available=-1Mi").is_err());
        assert!(parse_minimum_reclaims("memory.available=1Mi,memory.available=2Mi").is_err());
    }

    #[test]
    fn the_defaults_are_the_kubelets() {
        let s = Settings::default();
        assert_eq!(s.thresholds.len(), 5);
        assert_eq!(
            s.thresholds[4],
            Threshold {
                signal: Signal::AllocatableMemoryAvailable,
                limit: Limit::Quantity(100 << 20),
                grace: SignedDuration::ZERO,
                min_reclaim: None,
            }
        );
        assert!(s.thresholds.iter().all(Threshold::is_hard));
        assert_eq!(s.interval, Duration::from_secs(10));
    }
}
