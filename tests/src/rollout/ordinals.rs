//! A StatefulSet's pods followed by name: after every watch event, which pods are live (not
//! terminating) and which of them are Ready, so a test can read the order pods came and went in
//! and what was Ready when each came. Pure.

use std::collections::BTreeSet;

use serde_json::Value;

use super::census::Census;
use super::tally::{Line, Stamp, Tally};

/// The pods after one event.
#[derive(Debug, Clone)]
pub struct Sample {
    pub stamp: Stamp,
    /// Live pods by name.
    pub live: BTreeSet<String>,
    /// Live and Ready pods by name.
    pub ready: BTreeSet<String>,
}

impl Line for Sample {
    const LEGEND: &'static str = "live pods, ready ones starred";

    fn line(&self) -> String {
        let pods: Vec<String> = self
            .live
            .iter()
            .map(|n| {
                if self.ready.contains(n) {
                    format!("{n}*")
                } else {
                    n.clone()
                }
            })
            .collect();
        format!("{} {}", self.stamp.line(), pods.join(" "))
    }
}

/// The pods the watch has seen (a [`Census`], read by name).
#[derive(Debug, Clone, Default)]
pub struct Ordinals {
    census: Census,
}

impl Tally for Ordinals {
    type Sample = Sample;

    fn insert(&mut self, obj: &Value) {
        self.census.insert(obj);
    }

    fn apply(&mut self, event: &Value) -> bool {
        self.census.apply(event)
    }

    fn sample(&self, stamp: Stamp) -> Sample {
        let live: Vec<_> = self.census.pods().filter(|p| !p.terminating).collect();
        Sample {
            stamp,
            live: live.iter().map(|p| p.name.clone()).collect(),
            ready: live
                .iter()
                .filter(|p| p.ready && p.phase == "Running")
                .map(|p| p.name.clone())
                .collect(),
        }
    }

    fn summary(&self) -> String {
        let s = self.sample(Stamp {
            at: Default::default(),
            rv: 0,
            event: String::new(),
        });
        format!("live {:?}, ready {:?}", s.live, s.ready)
    }
}

/// Each pod that became live, in order, with the pods that were Ready just before.
pub fn arrivals(samples: &[Sample]) -> Vec<(String, BTreeSet<String>)> {
    crossings(samples, true, |before| &before.ready)
}

/// Each pod that stopped being live (started terminating or vanished), in order, with the pods
/// that were live just before.
pub fn departures(samples: &[Sample]) -> Vec<(String, BTreeSet<String>)> {
    crossings(samples, false, |before| &before.live)
}

/// Each pod that became live (`arriving`) or stopped being live (else) from one sample to the
/// next, in order, with what `context` reads from the sample just before.
fn crossings(
    samples: &[Sample],
    arriving: bool,
    context: impl Fn(&Sample) -> &BTreeSet<String>,
) -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for w in samples.windows(2) {
        let (in_one, not_in_other) = if arriving {
            (&w[1].live, &w[0].live)
        } else {
            (&w[0].live, &w[1].live)
        };
        for n in in_one.difference(not_in_other) {
            out.push((n.clone(), context(&w[0]).clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample(live: &[&str], ready: &[&str]) -> Sample {
        Sample {
            stamp: Stamp {
                at: Duration::ZERO,
                rv: 0,
                event: String::new(),
            },
            live: live.iter().map(|s| s.to_string()).collect(),
            ready: ready.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn arrivals_and_departures_come_in_watch_order() {
        let s = [
            sample(&[], &[]),
            sample(&["a"], &[]),
            sample(&["a"], &["a"]),
            sample(&["a", "b"], &["a"]),
            sample(&["a"], &["a"]),
        ];
        let a: Vec<_> = arrivals(&s)
            .into_iter()
            .map(|(n, r)| (n, r.len()))
            .collect();
        assert_eq!(a, [("a".to_string(), 0), ("b".to_string(), 1)]);
        let d: Vec<_> = departures(&s).into_iter().map(|(n, _)| n).collect();
        assert_eq!(d, ["b"]);
    }
}
