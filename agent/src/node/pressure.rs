//! Node pressure as the kubelet's eviction manager judges it: hard eviction thresholds in the
//! kubelet's `--eviction-hard` syntax (`memory.available<100Mi,nodefs.available<10%`), met when
//! a signal's observed value falls below the quantity or the percentage of its capacity;
//! MemoryPressure from `memory.available`, DiskPressure from the `nodefs`/`imagefs` signals,
//! PIDPressure from `pid.available`. A condition stays True for the pressure transition period
//! after its thresholds stop being met (the kubelet's `--eviction-pressure-transition-period`,
//! 5 minutes by default), so a node hovering at a threshold does not flap. The eviction manager
//! ([`crate::eviction`]) adds soft thresholds and acts on what is met.
//!
//! As the kubelet's flag, a given `--eviction-hard` replaces the defaults entirely (signals it
//! leaves out have no threshold); `0%` and `100%` mean no threshold.
//!
//! Planner: pure, no I/O.

use berth_api::quantity::Quantity;
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;

/// The kubelet's Linux defaults (`DefaultEvictionHard`).
pub const DEFAULT_EVICTION_HARD: &str =
    "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%";
/// The kubelet's default `--eviction-pressure-transition-period`.
pub const TRANSITION_PERIOD: SignedDuration = SignedDuration::from_secs(300);

/// An eviction signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    MemoryAvailable,
    /// The pods' share of memory (the `kubepods` cgroup's limit) less what they use: added
    /// beside each hard `memory.available` threshold (see
    /// [`crate::eviction::config::add_allocatable_thresholds`]).
    AllocatableMemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    PidAvailable,
}

impl Signal {
    pub fn parse(s: &str) -> Option<Signal> {
        Some(match s {
            "memory.available" => Signal::MemoryAvailable,
            "allocatableMemory.available" => Signal::AllocatableMemoryAvailable,
            "nodefs.available" => Signal::NodeFsAvailable,
            "nodefs.inodesFree" => Signal::NodeFsInodesFree,
            "imagefs.available" => Signal::ImageFsAvailable,
            "imagefs.inodesFree" => Signal::ImageFsInodesFree,
            "pid.available" => Signal::PidAvailable,
            _ => return None,
        })
    }

    /// The flag's spelling of the signal.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    /// The resource reclaimed for the signal, as upstream names it in eviction messages.
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }

    /// The condition the signal's threshold raises.
    pub fn condition(self) -> Pressure {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Pressure::Memory,
            Signal::PidAvailable => Pressure::Pid,
            _ => Pressure::Disk,
        }
    }
}

/// A node pressure condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    Memory,
    Disk,
    Pid,
}

/// A threshold's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// In the signal's unit (bytes, inodes, pids).
    Quantity(i64),
    /// A fraction of the signal's capacity (0 < f < 1).
    Fraction(f64),
}

impl Limit {
    /// The threshold's quantity for a signal of `capacity` (a fraction rounds down, as
    /// upstream's `GetThresholdQuantity`).
    pub fn quantity(self, capacity: i64) -> i64 {
        match self {
            Limit::Quantity(q) => q,
            Limit::Fraction(f) => (f * capacity as f64) as i64,
        }
    }
}

/// Hard eviction thresholds by signal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds(pub BTreeMap<Signal, Limit>);

impl Thresholds {
    /// Parses the kubelet's `--eviction-hard` (an empty string: no thresholds).
    pub fn parse(s: &str) -> Result<Thresholds, String> {
        let mut out = BTreeMap::new();
        for statement in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let Some((name, value)) = statement.split_once('<') else {
                return Err(format!(
                    "invalid eviction threshold {statement:?}: want signal<value (only < is supported)"
                ));
            };
            let (name, value) = (name.trim(), value.trim());
            let signal =
                Signal::parse(name).ok_or_else(|| format!("unsupported eviction signal {name}"))?;
            if out.contains_key(&signal) {
                return Err(format!("duplicate eviction threshold for signal {name}"));
            }
            let limit = if let Some(pct) = value.strip_suffix('%') {
                if value == "0%" || value == "100%" {
                    continue;
                }
                let p: f64 = pct
                    .parse()
                    .map_err(|_| format!("invalid eviction percentage {value:?} for {name}"))?;
                if !(0.0..=100.0).contains(&p) {
                    return Err(format!(
                        "eviction percentage threshold {name} must be between 0% and 100%: {value}"
                    ));
                }
                Limit::Fraction(p / 100.0)
            } else {
                let q = Quantity::parse(value)
                    .map_err(|e| format!("invalid eviction threshold {value:?} for {name}: {e}"))?;
                if q.value() <= 0 {
                    return Err(format!(
                        "eviction threshold {name} must be positive: {value}"
                    ));
                }
                Limit::Quantity(q.value())
            };
            out.insert(signal, limit);
        }
        Ok(Thresholds(out))
    }
}

/// One signal's observation: what is available and of how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    pub available: i64,
    pub capacity: i64,
}

/// The pressures whose thresholds `observed` meets (signals not observed meet nothing).
pub fn met(thresholds: &Thresholds, observed: &BTreeMap<Signal, Observed>) -> Vec<Pressure> {
    let mut out: Vec<Pressure> = thresholds
        .0
        .iter()
        .filter_map(|(signal, limit)| {
            let o = observed.get(signal)?;
            let floor = match limit {
                Limit::Quantity(q) => *q as f64,
                Limit::Fraction(f) => f * o.capacity as f64,
            };
            ((o.available as f64) < floor).then(|| signal.condition())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The pressures reported, with the transition period: a pressure met now, or met within the
/// period before `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    last_met: BTreeMap<Pressure, Timestamp>,
    period: SignedDuration,
}

impl Default for Reported {
    fn default() -> Self {
        Reported::with_period(TRANSITION_PERIOD)
    }
}

impl Reported {
    /// Pressures reported for `period` after they were last met
    /// (`--eviction-pressure-transition-period`).
    pub fn with_period(period: SignedDuration) -> Self {
        Reported {
            last_met: BTreeMap::new(),
            period,
        }
    }

    /// Records what is met at `now`; returns whether each pressure is reported.
    pub fn observe(&mut self, met: &[Pressure], now: Timestamp) -> Pressures {
        for p in met {
            self.last_met.insert(*p, now);
        }
        let on = |p: Pressure| {
            self.last_met
                .get(&p)
                .is_some_and(|at| now.duration_since(*at) < self.period)
        };
        Pressures {
            memory: on(Pressure::Memory),
            disk: on(Pressure::Disk),
            pid: on(Pressure::Pid),
        }
    }
}

/// The node's pressure conditions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressures {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    #[test]
    fn the_kubelets_syntax_parses_into_quantities_and_fractions() {
        let t = Thresholds::parse(DEFAULT_EVICTION_HARD).unwrap();
        assert_eq!(
            t.0.get(&Signal::MemoryAvailable),
            Some(&Limit::Quantity(100 * 1024 * 1024))
        );
        assert_eq!(
            t.0.get(&Signal::NodeFsAvailable),
            Some(&Limit::Fraction(0.1))
        );
        assert_eq!(t.0.len(), 4);
        let pid = Thresholds::parse("pid.available<5%, imagefs.available < 2Gi").unwrap();
        assert_eq!(
            pid.0.get(&Signal::PidAvailable),
            Some(&Limit::Fraction(0.05))
        );
        assert_eq!(
            pid.0.get(&Signal::ImageFsAvailable),
            Some(&Limit::Quantity(2 * 1024 * 1024 * 1024))
        );
        assert_eq!(Thresholds::parse("").unwrap().0.len(), 0);
        assert_eq!(
            Thresholds::parse("nodefs.available<0%,memory.available<100%")
                .unwrap()
                .0
                .len(),
            0,
            "0% and 100% set no threshold"
        );
    }

    #[test]
    fn malformed_thresholds_are_refused() {
        for bad in [
            "memory.available>100Mi",
            "cpu.available<1",
            "nodefs.available<110%",
            "memory.available<-1Mi",
            "memory.available<lots",
            "memory.available<1Mi,memory.available<2Mi",
        ] {
            assert!(Thresholds::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn thresholds_raise_their_conditions_when_availability_falls_below_them() {
        let t = Thresholds::parse(
            "memory.available<100Mi,nodefs.available<10%,imagefs.inodesFree<5%,pid.available<1000",
        )
        .unwrap();
        let obs = |signal, available, capacity| {
            (
                signal,
                Observed {
                    available,
                    capacity,
                },
            )
        };
        let mi = 1024 * 1024;
        type Case = (&'static str, Vec<(Signal, Observed)>, Vec<Pressure>);
        let cases: Vec<Case> = vec![
            (
                "plenty of everything",
                vec![
                    obs(Signal::MemoryAvailable, 500 * mi, 1000 * mi),
                    obs(Signal::NodeFsAvailable, 50, 100),
                ],
                vec![],
            ),
            (
                "memory under 100Mi",
                vec![obs(Signal::MemoryAvailable, 99 * mi, 1000 * mi)],
                vec![Pressure::Memory],
            ),
            (
                "exactly at the threshold is not under it",
                vec![obs(Signal::NodeFsAvailable, 10, 100)],
                vec![],
            ),
            (
                "disk under 10%",
                vec![obs(Signal::NodeFsAvailable, 9, 100)],
                vec![Pressure::Disk],
            ),
            (
                "image inodes count as disk pressure",
                vec![obs(Signal::ImageFsInodesFree, 4, 100)],
                vec![Pressure::Disk],
            ),
            (
                "few pids left",
                vec![obs(Signal::PidAvailable, 999, 32768)],
                vec![Pressure::Pid],
            ),
            (
                "a signal without a threshold raises nothing",
                vec![obs(Signal::NodeFsInodesFree, 0, 100)],
                vec![],
            ),
        ];
        for (name, observed, want) in cases {
            let observed: BTreeMap<Signal, Observed> = observed.into_iter().collect();
            assert_eq!(met(&t, &observed), want, "{name}");
        }
    }

    #[test]
    fn a_pressure_stays_for_the_transition_period_after_it_was_last_met() {
        let mut r = Reported::default();
        assert!(r.observe(&[Pressure::Disk], at(0)).disk);
        assert!(r.observe(&[], at(299)).disk, "within 5 minutes");
        assert!(!r.observe(&[], at(300)).disk, "5 minutes after");
        assert!(!r.observe(&[], at(301)).memory);
    }
}
