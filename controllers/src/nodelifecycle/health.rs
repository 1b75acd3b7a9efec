//! A node's heartbeats as the controller observes them (upstream `nodeHealthData`): the
//! Lease's `renewTime` and the Ready condition's `lastHeartbeatTime`, and the controller's own
//! time of the last change of either (the probe time). The grace period runs from the probe
//! time, on the controller's clock, never from the times the agent wrote: a skewed agent clock
//! cannot make a node look dead or alive. A Ready condition that turns True is a heartbeat too,
//! whatever its time says: only an agent writes True, and its heartbeat has second resolution,
//! so a post can carry the same time as the status the controller marked Unknown. The record is soft state, as upstream's: a restarted
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
    /// Whether the Ready condition was True.
    pub ready: bool,
}

/// The heartbeats a node shows now; `None` for a signal the controller did not look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeats {
    pub lease_renewed: Option<Option<String>>,
    pub status_heartbeat: Option<Option<String>>,
    /// Whether the Ready condition is True; `None` when not looked at.
    pub ready: Option<bool>,
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
            ready: seen.ready.unwrap_or(false),
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
    if let Some(ready) = seen.ready {
        beat |= ready && !prev.ready;
        next.ready = ready;
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
            ..Heartbeats::default()
        }
    }

    fn status(t: &str) -> Heartbeats {
        Heartbeats {
            status_heartbeat: Some(Some(t.to_string())),
            ..Heartbeats::default()
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
                    ..Heartbeats::default()
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
    fn a_ready_condition_turning_true_is_a_heartbeat_even_with_the_same_time() {
        let post = |ready| Heartbeats {
            status_heartbeat: Some(Some("12:00:01Z".to_string())),
            ready: Some(ready),
            ..Heartbeats::default()
        };
        let marked_unknown = observe(None, &post(false), at(0));
        let cases = [
            ("the agent posts Ready=True again", true, at(30)),
            ("still not Ready at the same time", false, at(0)),
        ];
        for (name, ready, want) in cases {
            assert_eq!(
                observe(Some(&marked_unknown), &post(ready), at(30)).probe,
                want,
                "{name}"
            );
        }
        let ready = observe(None, &post(true), at(0));
        assert_eq!(
            observe(Some(&ready), &post(false), at(30)).probe,
            at(0),
            "the controller's own Unknown is no heartbeat"
        );
    }

    #[test]
    fn a_restarted_controller_gives_every_node_a_full_grace_period() {
        let h = observe(None, &status("written long ago"), at(500));
        assert_eq!(h.probe, at(500));
        assert_eq!(h.status_heartbeat.as_deref(), Some("written long ago"));
    }
}
