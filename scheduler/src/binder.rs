//! The scheduler's writes, all blocking (call them off the async threads): the binding, the
//! `PodScheduled=False` status of an unschedulable pod, a preemption (the preemptor's
//! `status.nominatedNodeName`, its victims disrupted as evictions are), and the events about
//! them.

use super::facts::PodInfo;
use super::volumes::SELECTED_NODE;
use berth_registry::RegistryError;
use berth_registry::events::{EventType, Recorder};
use berth_registry::{Part, Registry, WriteOptions};
use berth_shared::resource::{PERSISTENT_VOLUME_CLAIMS, PODS};
use serde_json::{Value, json};

/// The component name events are recorded under.
pub const COMPONENT: &str = "default-scheduler";

/// Longest event message; longer ones are cut with ` ...` (upstream's note length limit).
pub const EVENT_MESSAGE_LIMIT: usize = 1024;

/// What came of a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    Done,
    /// The pod no longer needs a node: deleted, being deleted, or bound by someone else.
    Gone,
    Failed(String),
}

/// Annotates the pod's unbound `WaitForFirstConsumer` claims with the chosen node (upstream's
/// VolumeBinding PreBind), so the volume controller binds or provisions them there.
fn select_node(registry: &Registry, pod: &PodInfo, node: &str) -> Result<(), RegistryError> {
    for claim in &pod.volumes.select_node {
        registry.update_with(
            PERSISTENT_VOLUME_CLAIMS,
            Some(&pod.namespace),
            claim,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                let bound = obj
                    .pointer("/spec/volumeName")
                    .and_then(Value::as_str)
                    .is_some_and(|v| !v.is_empty());
                let current = obj
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(SELECTED_NODE))
                    .and_then(Value::as_str);
                if !bound && current != Some(node) {
                    if !obj["metadata"]["annotations"].is_object() {
                        obj["metadata"]["annotations"] = json!({});
                    }
                    obj["metadata"]["annotations"][SELECTED_NODE] = json!(node);
                }
                Ok::<_, RegistryError>(obj)
            },
        )?;
    }
    Ok(())
}

/// Binds `pod` to `node` through the registry's `pods/binding` write, after pointing its
/// waiting claims at the node.
pub fn bind(registry: &Registry, pod: &PodInfo, node: &str) -> Bound {
    if let Err(e) = select_node(registry, pod, node) {
        return Bound::Failed(format!("running PreBind plugin \"VolumeBinding\": {e}"));
    }
    match registry.bind(&pod.namespace, &pod.name, node) {
        Ok(_) => Bound::Done,
        Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => Bound::Gone,
        Err(e) => Bound::Failed(e.to_string()),
    }
}

/// A pod object with the `PodScheduled` condition set to False/Unschedulable with `message`.
/// `None` when nothing would change (the same condition is there) or the pod is bound now.
/// The transition time moves only when the condition's status changes, as upstream.
pub fn unschedulable_status(mut pod: Value, message: &str, now: &str) -> Option<Value> {
    if pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty())
    {
        return None;
    }
    let mut conditions = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let at = conditions.iter().position(|c| c["type"] == "PodScheduled");
    let old = at.map(|i| conditions[i].clone());
    if old.as_ref().is_some_and(|c| {
        c["status"] == "False" && c["reason"] == "Unschedulable" && c["message"] == message
    }) {
        return None;
    }
    let since = match &old {
        Some(c) if c["status"] == "False" => c["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let condition = json!({
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": null,
        "lastTransitionTime": since,
        "reason": "Unschedulable",
        "message": message,
    });
    match at {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    pod["status"]["conditions"] = json!(conditions);
    if pod["status"].get("phase").is_none() {
        pod["status"]["phase"] = json!("Pending");
    }
    Some(pod)
}

/// Rewrites the status of `pod` with `f` (the stored object in, the new one out), unless the
/// pod is gone or was replaced by another of the same name.
fn update_pod_status(
    registry: &Registry,
    pod: &PodInfo,
    f: impl Fn(Value) -> Value,
) -> Result<(), RegistryError> {
    let r = registry.update_with(
        PODS,
        Some(&pod.namespace),
        &pod.name,
        Part::Status,
        &WriteOptions::default(),
        |current| {
            if current.pointer("/metadata/uid").and_then(Value::as_str) != Some(&*pod.uid) {
                return Ok(current);
            }
            Ok::<_, RegistryError>(f(current))
        },
    );
    match r {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes the unschedulable condition of `pod` (a no-op when it is already there: without a
/// write when the scheduler's copy of the pod has it, as upstream's `updatePod`, else after
/// reading the stored pod).
pub fn write_unschedulable(
    registry: &Registry,
    pod: &PodInfo,
    message: &str,
) -> Result<(), RegistryError> {
    if pod.unschedulable == Some(crate::facts::message_fingerprint(message)) {
        return Ok(());
    }
    let now = berth_registry::meta::now_rfc3339();
    update_pod_status(registry, pod, |current| {
        unschedulable_status(current.clone(), message, &now).unwrap_or(current)
    })
}

/// The victims' `DisruptionTarget` condition, as upstream words it.
pub const PREEMPTION: berth_registry::eviction::Disruption = berth_registry::eviction::Disruption {
    reason: "PreemptionByScheduler",
    message: "default-scheduler: preempting to accommodate a higher priority pod",
};

/// Carries out a preemption: each victim gets the `DisruptionTarget` condition and is
/// deleted gracefully (unless already terminating), then the preemptor is nominated to `node`
/// with its unschedulable condition. Returns the victims actually disrupted (for their
/// `Preempted` events).
pub fn preempt(
    registry: &Registry,
    pod: &PodInfo,
    node: &str,
    victims: &[std::sync::Arc<PodInfo>],
    message: &str,
) -> Result<Vec<std::sync::Arc<PodInfo>>, RegistryError> {
    let mut disrupted = Vec::new();
    for v in victims.iter().filter(|v| !v.terminating) {
        let opts = berth_registry::DeleteOptions {
            preconditions: Some(berth_registry::DeletePreconditions {
                uid: Some(v.uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match registry.disrupt(&v.namespace, &v.name, PREEMPTION, &opts) {
            Ok(()) => disrupted.push(v.clone()),
            // Gone already, or replaced by another pod of that name: nothing to preempt.
            Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let now = berth_registry::meta::now_rfc3339();
    update_pod_status(registry, pod, |current| {
        let bound = current
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if bound {
            return current;
        }
        let mut next = unschedulable_status(current.clone(), message, &now).unwrap_or(current);
        next["status"]["nominatedNodeName"] = json!(node);
        next
    })?;
    Ok(disrupted)
}

/// Cuts a message to the event limit, on a character boundary.
pub fn truncate(message: &str) -> String {
    if message.len() <= EVENT_MESSAGE_LIMIT {
        return message.to_string();
    }
    let suffix = " ...";
    let mut end = EVENT_MESSAGE_LIMIT - suffix.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", &message[..end])
}

/// One event to record.
#[derive(Debug, Clone)]
pub struct EventJob {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

impl EventJob {
    pub fn scheduled(pod: &PodInfo, node: &str) -> EventJob {
        EventJob::about(
            pod,
            false,
            "Scheduled",
            format!(
                "Successfully assigned {}/{} to {node}",
                pod.namespace, pod.name
            ),
        )
    }

    /// Upstream's event on a victim (`Preempted`, naming the preemptor by uid).
    pub fn preempted(victim: &PodInfo, by: &PodInfo, node: &str) -> EventJob {
        EventJob::about(
            victim,
            false,
            "Preempted",
            format!("Preempted by pod {} on node {node}", by.uid),
        )
    }

    pub fn failed(pod: &PodInfo, message: &str) -> EventJob {
        EventJob::about(pod, true, "FailedScheduling", truncate(message))
    }

    fn about(pod: &PodInfo, warning: bool, reason: &'static str, message: String) -> EventJob {
        EventJob {
            namespace: pod.namespace.to_string(),
            name: pod.name.to_string(),
            uid: pod.uid.to_string(),
            resource_version: pod.resource_version.clone(),
            warning,
            reason,
            message,
        }
    }

    /// Records the event.
    pub fn record(&self, recorder: &Recorder) -> Result<(), RegistryError> {
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": self.name, "namespace": self.namespace, "uid": self.uid,
            "resourceVersion": self.resource_version}});
        let t = if self.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        recorder.record(&obj, t, self.reason, &self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_is_added_then_left_alone_while_the_message_holds() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}});
        let first = unschedulable_status(pod, "0/1 nodes are available: x.", "T1").unwrap();
        let c = &first["status"]["conditions"][0];
        assert_eq!(
            (&c["status"], &c["reason"], &c["lastTransitionTime"]),
            (&json!("False"), &json!("Unschedulable"), &json!("T1"))
        );
        assert!(unschedulable_status(first.clone(), "0/1 nodes are available: x.", "T2").is_none());
        // A new message keeps the transition time: the status did not change.
        let second = unschedulable_status(first, "0/2 nodes are available: y.", "T3").unwrap();
        let c = &second["status"]["conditions"][0];
        assert_eq!(
            (&c["message"], &c["lastTransitionTime"]),
            (&json!("0/2 nodes are available: y."), &json!("T1"))
        );
        assert_eq!(second["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_bound_pod_gets_no_unschedulable_condition() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
        assert!(unschedulable_status(pod, "m", "T").is_none());
    }

    #[test]
    fn long_event_messages_are_cut_like_upstream() {
        let long = "é".repeat(700);
        let cut = truncate(&long);
        assert!(cut.len() <= EVENT_MESSAGE_LIMIT && cut.ends_with(" ..."));
        assert_eq!(truncate("short"), "short");
    }
}
