//! A node's heartbeats as the controller observes them (upstream `nodeHealthData`): the
//! Lease's `renewTime` and the Ready condition's `lastHeartbeatTime`, and the controller's own
//! time of the last change of either (the probe time). The grace period runs from the probe
//! time, on the controller's clock, never from the times the agent wrote: a skewed agent clock
//! cannot make a node look dead or alive. The record is soft state, as upstream's: a restarted
//! controller starts every node's probe time at its first look, which gives every node a full
//! grace period before it can be marked Unknown.
//!
//! Planner: pure, no I/O.

use jiff::Timestamp;

/// The last heartbeats seen from one node, and when the controller saw one change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// When the controller last saw a heartbeat change (or first looked at the node).
    pub probe: Timestamp,
    /// The Lease's `spec.renewTime`, as written.
    pub lease_renewed: Option<String>,
    /// The Ready condition's `lastHeartbeatTime`, as written.
    pub status_heartbeat: Option<String>,
}

/// The heartbeats a node shows now; `None` for a signal the controller did not look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeats {
    pub lease_renewed: Option<Option<String>>,
    pub status_heartbeat: Option<Option<String>>,
}

/// The record after looking at `seen` at `now`: a heartbeat that changed (a Lease renewed, a
/// status posted) moves the probe time to `now`; a node seen for the first time starts there.
/// A Lease or status that disappears is no heartbeat.
pub fn observe(prev: Option<&Health>, seen: &Heartbeats, now: Timestamp) -> Health {
    let Some(prev) = prev else {
        return Health {
            probe: now,
            lease_renewed: seen.lease_renewed.clone().flatten(),
            status_heartbeat: seen.status_heartbeat.clone().flatten(),
        };
    };
    let mut next = prev.clone();
    let mut beat = false;
    if let Some(Some(renewed)) = &seen.lease_renewed
        && prev.lease_renewed.as_ref() != Some(renewed)
    {
        next.lease_renewed = Some(renewed.clone());
        beat = true;
    }
    if let Some(Some(heartbeat)) = &seen.status_heartbeat
        && prev.status_heartbeat.as_ref() != Some(heartbeat)
    {
        next.status_heartbeat = Some(heartbeat.clone());
        beat = true;
    }
    if beat {
        next.probe = now;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn lease(t: &str) -> Heartbeats {
        Heartbeats {
            lease_renewed: Some(Some(t.to_string())),
            status_heartbeat: None,
        }
    }

    fn status(t: &str) -> Heartbeats {
        Heartbeats {
            lease_renewed: None,
            status_heartbeat: Some(Some(t.to_string())),
        }
    }

    #[test]
    fn heartbeats_move_the_probe_time_only_when_they_change() {
        let first = observe(None, &lease("r1"), at(0));
        assert_eq!(
            first.probe,
            at(0),
            "a node seen for the first time starts now"
        );
        let cases: Vec<(&str, Heartbeats, Timestamp)> = vec![
            ("the same lease renewal is no heartbeat", lease("r1"), at(0)),
            ("a renewed lease is a heartbeat", lease("r2"), at(30)),
            ("a posted status is a heartbeat", status("s1"), at(30)),
            (
                "a lease that disappears is no heartbeat",
                Heartbeats {
                    lease_renewed: Some(None),
                    status_heartbeat: None,
                },
                at(0),
            ),
            (
                "a signal not looked at changes nothing",
                Heartbeats::default(),
                at(0),
            ),
        ];
        for (name, seen, want) in cases {
            assert_eq!(observe(Some(&first), &seen, at(30)).probe, want, "{name}");
        }
    }

    #[test]
    fn a_restarted_controller_gives_every_node_a_full_grace_period() {
        let h = observe(None, &status("written long ago"), at(500));
        assert_eq!(h.probe, at(500));
        assert_eq!(h.status_heartbeat.as_deref(), Some("written long ago"));
    }
}
