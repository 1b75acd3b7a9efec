//! The conditions the kubelet owns — PodReadyToStartContainers, Initialized, Ready,
//! ContainersReady, PodScheduled — with upstream's reasons and messages, and
//! `lastTransitionTime` kept while a condition keeps its status.
//!
//! Planner: pure, no I/O.

use berth_api::k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec};
use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::phase::any_regular_started;
use super::{Ctx, FAILED, SUCCEEDED};
use crate::pod::model::{Sandbox, is_sidecar, whole_seconds};

/// Conditions the kubelet owns; any other condition in the old status is kept as it is.
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.map(Into::into),
        message,
        ..PodCondition::default()
    }
}

/// Go prints a `[]string` as `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// `type_` true when nothing holds it back, else false with `reason` and the `messages` (what
/// holds it back).
fn held_back_by(type_: &str, reason: &str, messages: Vec<String>) -> PodCondition {
    if messages.is_empty() {
        condition(type_, true, None, None)
    } else {
        condition(type_, false, Some(reason), Some(messages.join(", ")))
    }
}

/// The kubelet's `containers with <state> status: [a b]` for each state with containers in it.
fn container_messages(states: [(&str, &[&str]); 2]) -> Vec<String> {
    states
        .iter()
        .filter(|(_, names)| !names.is_empty())
        .map(|(state, names)| format!("containers with {state} status: {}", go_list(names)))
        .collect()
}

pub(super) fn conditions(
    ctx: &Ctx<'_>,
    old: &[PodCondition],
    all: &[&ContainerStatus],
    phase: &str,
) -> Vec<PodCondition> {
    let mut out: Vec<PodCondition> = old
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    let sandbox_ready = matches!(ctx.observed.sandbox, Sandbox::Ready { .. });
    let containers_ready = containers_ready(ctx.spec, all, phase);
    let ready = pod_ready(ctx.spec, &out, &containers_ready);
    let generated = [
        condition("PodReadyToStartContainers", sandbox_ready, None, None),
        initialized(ctx.spec, all, phase),
        ready,
        containers_ready,
        condition("PodScheduled", true, None, None),
    ];
    let now = Time(whole_seconds(ctx.now));
    for mut c in generated {
        let previous = old
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status);
        c.last_transition_time = Some(
            previous
                .and_then(|o| o.last_transition_time.clone())
                .unwrap_or_else(|| now.clone()),
        );
        out.push(c);
    }
    out
}

fn find<'a>(all: &[&'a ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    all.iter().copied().find(|s| s.name == name)
}

fn containers_ready(spec: &PodSpec, all: &[&ContainerStatus], phase: &str) -> PodCondition {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_sidecar(c));
    let (mut unknown, mut unready) = (Vec::new(), Vec::new());
    for c in sidecars.chain(&spec.containers) {
        match find(all, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    const TYPE: &str = "ContainersReady";
    if phase == SUCCEEDED && unknown.is_empty() {
        return condition(TYPE, false, Some("PodCompleted"), None);
    }
    if phase == FAILED {
        return condition(TYPE, false, Some("PodFailed"), None);
    }
    let messages = container_messages([("unknown", &unknown), ("unready", &unready)]);
    held_back_by(TYPE, "ContainersNotReady", messages)
}

fn pod_ready(
    spec: &PodSpec,
    conditions: &[PodCondition],
    containers_ready: &PodCondition,
) -> PodCondition {
    if containers_ready.status != "True" {
        return PodCondition {
            type_: "Ready".into(),
            ..containers_ready.clone()
        };
    }
    let mut messages = Vec::new();
    for gate in spec.readiness_gates.iter().flatten() {
        let name = &gate.condition_type;
        match conditions.iter().find(|c| &c.type_ == name) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate \"{name}\" does not exist."
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate \"{name}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    held_back_by("Ready", "ReadinessGatesNotReady", messages)
}

fn initialized(spec: &PodSpec, all: &[&ContainerStatus], phase: &str) -> PodCondition {
    let (mut unknown, mut incomplete) = (Vec::new(), Vec::new());
    for c in spec.init_containers.iter().flatten() {
        match find(all, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if is_sidecar(c) && s.started != Some(true) => incomplete.push(c.name.as_str()),
            Some(s) if !is_sidecar(c) && !s.ready => incomplete.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    const TYPE: &str = "Initialized";
    if phase == SUCCEEDED && unknown.is_empty() {
        return condition(TYPE, true, Some("PodCompleted"), None);
    }
    let app: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .filter_map(|c| find(all, &c.name).cloned())
        .collect();
    if any_regular_started(&app) {
        return condition(TYPE, true, None, None);
    }
    let messages = container_messages([("unknown", &unknown), ("incomplete", &incomplete)]);
    held_back_by(TYPE, "ContainersNotInitialized", messages)
}
