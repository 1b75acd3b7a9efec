//! Reading a pod's status as the agent reports it (phase, conditions, container states,
//! timestamps), and following one container's runs across restarts to measure the restart
//! back-off. Pure: the tests feed it the pods they fetched.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde_json::Value;

/// The `PodScheduled=False` message of a waiting pod (reason
/// `Unschedulable`); Err says what the condition is instead.
pub fn unschedulable_message(p: &Value) -> Result<String, String> {
    let cond = p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled")
        .ok_or("no PodScheduled condition")?;
    if cond["status"] == "False" && cond["reason"] == "Unschedulable" {
        Ok(cond["message"].as_str().unwrap_or_default().to_string())
    } else {
        Err(format!("PodScheduled: {cond}"))
    }
}

/// `status.phase`, or `""`.
pub fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

/// `status.podIP`, if set.
pub fn pod_ip(pod: &Value) -> Option<&str> {
    pod["status"]["podIP"].as_str().filter(|s| !s.is_empty())
}

/// The `status` of condition `type` (`"True"`, `"False"`), if present.
pub fn condition<'a>(pod: &'a Value, kind: &str) -> Option<&'a str> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
}

/// Whether the `Ready` condition is `True`.
pub fn is_ready(pod: &Value) -> bool {
    condition(pod, "Ready") == Some("True")
}

/// The status of container `name` among `containerStatuses` or `initContainerStatuses`.
pub fn container_status<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|list| pod["status"][list].as_array())
        .flatten()
        .find(|c| c["name"] == name)
}

/// (containerID, restartCount) of container `name`: what changes when it restarts or is
/// replaced. Panics when the pod has no status for it.
pub fn container_identity(pod: &Value, name: &str) -> (String, u64) {
    let cs = container_status(pod, name).unwrap_or_else(|| panic!("no status of {name}: {pod:#}"));
    (
        container_id(cs).unwrap_or_default().to_string(),
        restart_count(cs),
    )
}

/// `restartCount` (0 when absent).
pub fn restart_count(cs: &Value) -> u64 {
    cs["restartCount"].as_u64().unwrap_or(0)
}

/// `state.waiting.reason`, if waiting.
pub fn waiting_reason(cs: &Value) -> Option<&str> {
    cs["state"]["waiting"]["reason"].as_str()
}

/// `state.terminated`, if terminated.
pub fn terminated(cs: &Value) -> Option<&Value> {
    cs["state"]["terminated"]
        .as_object()
        .map(|_| &cs["state"]["terminated"])
}

/// `lastState.terminated`, if any.
pub fn last_terminated(cs: &Value) -> Option<&Value> {
    cs["lastState"]["terminated"]
        .as_object()
        .map(|_| &cs["lastState"]["terminated"])
}

/// `state.running.startedAt`, if running.
pub fn running_since(cs: &Value) -> Option<Timestamp> {
    time(&cs["state"]["running"]["startedAt"])
}

/// `containerID` without its `containerd://` scheme.
pub fn container_id(cs: &Value) -> Option<&str> {
    cs["containerID"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(|s| s.split_once("://").map_or(s, |(_, id)| id))
}

/// Whether IPv4 address `ip` lies in `cidr` (`10.200.1.0/24`); false for anything unparsable.
pub fn ipv4_in_cidr(ip: &str, cidr: &str) -> bool {
    let parse = |s: &str| s.parse::<std::net::Ipv4Addr>().ok().map(u32::from);
    let Some((net, prefix)) = cidr.split_once('/') else {
        return false;
    };
    let (Some(ip), Some(net), Ok(prefix)) = (parse(ip), parse(net), prefix.parse::<u32>()) else {
        return false;
    };
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix.min(32))
    };
    ip & mask == net & mask
}

/// An RFC 3339 timestamp field.
pub fn time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

/// A one-line summary of every container state in a pod, for failure messages.
pub fn summary(pod: &Value) -> String {
    let mut parts = vec![format!(
        "phase={} ready={} ip={}",
        phase(pod),
        condition(pod, "Ready").unwrap_or("-"),
        pod_ip(pod).unwrap_or("-")
    )];
    for list in ["initContainerStatuses", "containerStatuses"] {
        for cs in pod["status"][list].as_array().into_iter().flatten() {
            let state = cs["state"]
                .as_object()
                .and_then(|o| o.iter().next())
                .map(|(k, v)| {
                    let reason = v["reason"].as_str().unwrap_or("");
                    let code = v["exitCode"].as_i64().map(|c| format!(" exit={c}"));
                    format!("{k}{}{}", if reason.is_empty() { "" } else { ":" }, reason)
                        + &code.unwrap_or_default()
                })
                .unwrap_or_else(|| "-".into());
            parts.push(format!(
                "{}[{state} restarts={} ready={}]",
                cs["name"].as_str().unwrap_or("?"),
                restart_count(cs),
                cs["ready"]
            ));
        }
    }
    parts.join(" ")
}

/// One run of a container: the restart number it was first seen with, when it started and
/// when it finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunTimes {
    pub index: u64,
    pub started: Option<Timestamp>,
    pub finished: Option<Timestamp>,
}

/// The runs of one container, gathered from successive observations of its status and keyed
/// by container id (each run is a new container): `state` describes the current run (number
/// `restartCount`), `lastState` the one before. Keying by id keeps one run from being counted
/// twice when a status shows the same run in both places.
#[derive(Debug, Clone, Default)]
pub struct RunLog {
    pub runs: BTreeMap<String, RunTimes>,
    /// Every `state.waiting.reason` seen.
    pub waiting_reasons: BTreeSet<String>,
}

/// The id of a terminated state (its own `containerID`, else `fallback`).
fn state_id(state: &Value, fallback: String) -> String {
    state["containerID"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(|s| s.split_once("://").map_or(s, |(_, id)| id).to_string())
        .unwrap_or(fallback)
}

impl RunLog {
    pub fn observe(&mut self, cs: &Value) {
        let n = restart_count(cs);
        if let Some(reason) = waiting_reason(cs) {
            self.waiting_reasons.insert(reason.to_string());
        }
        let current = container_id(cs).map_or_else(|| format!("#{n}"), str::to_string);
        let mut note =
            |id: String, index: u64, started: Option<Timestamp>, finished: Option<Timestamp>| {
                let r = self.runs.entry(id).or_insert(RunTimes {
                    index,
                    ..RunTimes::default()
                });
                r.started = r.started.or(started);
                r.finished = r.finished.or(finished);
            };
        if let Some(t) = terminated(cs) {
            let id = state_id(t, current.clone());
            note(id, n, time(&t["startedAt"]), time(&t["finishedAt"]));
        }
        if let Some(started) = running_since(cs) {
            note(current, n, Some(started), None);
        }
        if let Some(t) = last_terminated(cs) {
            let previous = n.saturating_sub(1);
            let id = state_id(t, format!("#{previous}"));
            note(id, previous, time(&t["startedAt"]), time(&t["finishedAt"]));
        }
    }

    /// The runs in the order they ran (by start, else finish, then restart number).
    pub fn ordered(&self) -> Vec<(&str, RunTimes)> {
        let mut runs: Vec<(&str, RunTimes)> =
            self.runs.iter().map(|(id, r)| (id.as_str(), *r)).collect();
        runs.sort_by_key(|(_, r)| (r.started.or(r.finished), r.index));
        runs
    }

    /// Whole seconds from each run's finish to the next run's start, in order, up to the first
    /// run whose times are not known yet. Leading runs whose gap is unknown are passed over: a
    /// run seen only while it ran, whose successor ended too before the next status (the
    /// kubelet's immediate first restart), never shows its finish.
    pub fn gaps(&self) -> Vec<i64> {
        let runs = self.ordered();
        let mut out = Vec::new();
        for pair in runs.windows(2) {
            match (pair[0].1.finished, pair[1].1.started) {
                (Some(finished), Some(started)) => {
                    out.push(started.as_second() - finished.as_second())
                }
                _ if out.is_empty() => {}
                _ => break,
            }
        }
        out
    }
}

/// Extra time a restart may take beyond its back-off (status sync, a loaded CI machine).
pub const BACKOFF_SLACK_SECS: i64 = 15;

/// Judges restart gaps (seconds) against Kubernetes' back-off: 10 s, then 20 s. The kubelet
/// restarts a container that exited for the first time without delay and only then backs
/// off, so one leading gap under 10 s is allowed. `Ok(None)`: not enough gaps yet;
/// `Ok(Some((first, second)))`: the two back-off gaps measured; `Err`: a violation.
///
/// Worked example: gaps `[0, 10, 21]` → the immediate first restart is skipped →
/// `Ok(Some((10, 21)))`; `[10, 20]` → `Ok(Some((10, 20)))`; `[0, 3]` → `Err` (3 < 10).
/// Timestamps have whole seconds, but floor(a + T) − floor(a) ≥ floor(T), so a true gap of at
/// least 10 s never shows as 9.
pub fn judge_backoff(gaps: &[i64]) -> Result<Option<(i64, i64)>, String> {
    Ok(judge_backoffs(gaps, 2)?.map(|g| (g[0], g[1])))
}

/// [`judge_backoff`] for the first `n` back-offs: 10 s, 20 s, 40 s … each at least its
/// delay and at most [`BACKOFF_SLACK_SECS`] over it. `Ok(Some(gaps))` once `n` are measured.
pub fn judge_backoffs(gaps: &[i64], n: usize) -> Result<Option<Vec<i64>>, String> {
    let skip = usize::from(gaps.first().is_some_and(|g| *g < 10));
    let rest = &gaps[skip.min(gaps.len())..];
    let ordinal = ["first", "second", "third", "fourth", "fifth"];
    for (i, gap) in rest.iter().take(n).enumerate() {
        let delay = 10i64 << i;
        let which = ordinal.get(i).copied().unwrap_or("next");
        if *gap < delay {
            return Err(format!(
                "restart gaps {gaps:?}: the {which} back-off is under {delay} s"
            ));
        }
        if *gap > delay + BACKOFF_SLACK_SECS {
            return Err(format!(
                "restart gaps {gaps:?}: the {which} back-off took over {} s",
                delay + BACKOFF_SLACK_SECS
            ));
        }
    }
    Ok((rest.len() >= n).then(|| rest[..n].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cs(restarts: u64, id: &str, state: Value, last: Value) -> Value {
        json!({"name": "c", "restartCount": restarts, "containerID": format!("containerd://{id}"),
               "state": state, "lastState": last})
    }

    fn term(id: &str, start: &str, finish: &str) -> Value {
        json!({"terminated": {"exitCode": 1, "reason": "Error", "containerID": format!("containerd://{id}"),
                              "startedAt": start, "finishedAt": finish}})
    }

    #[test]
    fn readers_find_containers_conditions_and_ids() {
        let pod = json!({"status": {"phase": "Running", "podIP": "10.200.1.5",
            "conditions": [{"type": "Ready", "status": "True"}],
            "initContainerStatuses": [{"name": "init", "restartCount": 0}],
            "containerStatuses": [{"name": "app", "restartCount": 2,
                "containerID": "containerd://abc", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(phase(&pod), "Running");
        assert!(is_ready(&pod));
        assert_eq!(pod_ip(&pod), Some("10.200.1.5"));
        let app = container_status(&pod, "app").unwrap();
        assert_eq!(restart_count(app), 2);
        assert_eq!(container_id(app), Some("abc"));
        assert_eq!(waiting_reason(app), Some("CrashLoopBackOff"));
        assert!(container_status(&pod, "init").is_some());
        assert!(summary(&pod).contains("app[waiting:CrashLoopBackOff restarts=2"));
    }

    #[test]
    fn addresses_are_matched_against_cidrs() {
        assert!(ipv4_in_cidr("10.200.1.7", "10.200.1.0/24"));
        assert!(!ipv4_in_cidr("10.200.2.7", "10.200.1.0/24"));
        assert!(ipv4_in_cidr("10.200.2.7", "10.200.0.0/16"));
        assert!(!ipv4_in_cidr("nonsense", "10.200.0.0/16"));
        assert!(!ipv4_in_cidr("10.200.2.7", "10.200.0.0"));
    }

    #[test]
    fn runs_are_pieced_together_from_state_and_last_state() {
        let t = |s: u32| format!("2024-01-01T00:00:{s:02}Z");
        let mut log = RunLog::default();
        log.observe(&cs(0, "r0", term("r0", &t(0), &t(1)), json!({})));
        log.observe(&cs(
            1,
            "r1",
            json!({"running": {"startedAt": t(1)}}),
            term("r0", &t(0), &t(1)),
        ));
        log.observe(&cs(
            2,
            "r1",
            json!({"waiting": {"reason": "CrashLoopBackOff"}}),
            term("r1", &t(1), &t(2)),
        ));
        log.observe(&cs(
            3,
            "r3",
            json!({"running": {"startedAt": t(32)}}),
            term("r2", &t(12), &t(12)),
        ));
        // Run r2 was never current in an observed status: its times come from lastState.
        assert_eq!(log.gaps(), [0, 10, 20]);
        assert!(log.waiting_reasons.contains("CrashLoopBackOff"));
        let order: Vec<&str> = log.ordered().iter().map(|(id, _)| *id).collect();
        assert_eq!(order, ["r0", "r1", "r2", "r3"]);
    }

    #[test]
    fn a_run_shown_as_both_state_and_last_state_counts_once() {
        let t = |s: u32| format!("2024-01-01T00:00:{s:02}Z");
        let mut log = RunLog::default();
        log.observe(&cs(0, "r0", term("r0", &t(0), &t(0)), json!({})));
        // A status whose restartCount ran ahead of its states: both describe r0.
        log.observe(&cs(
            1,
            "r0",
            term("r0", &t(0), &t(0)),
            term("r0", &t(0), &t(0)),
        ));
        log.observe(&cs(
            1,
            "r1",
            json!({"running": {"startedAt": t(10)}}),
            term("r0", &t(0), &t(0)),
        ));
        assert_eq!(log.gaps(), [10]);
    }

    #[test]
    fn a_first_run_whose_end_was_never_seen_is_passed_over() {
        let t = |s: u32| format!("2024-01-01T00:00:{s:02}Z");
        let mut log = RunLog::default();
        log.observe(&cs(
            0,
            "r0",
            json!({"running": {"startedAt": t(0)}}),
            json!({}),
        ));
        // r0 ended and r1 ran and ended before the next status: r0's end is never shown.
        log.observe(&cs(
            2,
            "r1",
            json!({"waiting": {"reason": "CrashLoopBackOff"}}),
            term("r1", &t(1), &t(1)),
        ));
        log.observe(&cs(
            3,
            "r2",
            json!({"running": {"startedAt": t(11)}}),
            term("r1", &t(1), &t(1)),
        ));
        log.observe(&cs(
            4,
            "r3",
            json!({"running": {"startedAt": t(31)}}),
            term("r2", &t(11), &t(11)),
        ));
        assert_eq!(log.gaps(), [10, 20]);
    }

    #[test]
    fn backoff_judgement_follows_the_kubelet() {
        assert_eq!(judge_backoff(&[]), Ok(None));
        assert_eq!(judge_backoff(&[0]), Ok(None));
        assert_eq!(judge_backoff(&[0, 10]), Ok(None));
        assert_eq!(judge_backoff(&[0, 10, 21]), Ok(Some((10, 21))));
        assert_eq!(
            judge_backoffs(&[0, 10, 21, 40], 3),
            Ok(Some(vec![10, 21, 40]))
        );
        assert_eq!(judge_backoffs(&[10, 21], 3), Ok(None));
        assert!(judge_backoffs(&[10, 21, 30], 3).is_err());
        assert_eq!(judge_backoff(&[10, 20]), Ok(Some((10, 20))));
        assert_eq!(judge_backoff(&[11]), Ok(None));
        assert!(judge_backoff(&[0, 3]).is_err());
        assert!(judge_backoff(&[10, 12]).is_err());
        assert!(judge_backoff(&[0, 0]).is_err());
        assert!(judge_backoff(&[60]).is_err());
        assert!(judge_backoff(&[10, 300]).is_err());
    }
}
