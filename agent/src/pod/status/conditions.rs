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
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if messages.is_empty() {
        condition(TYPE, true, None, None)
    } else {
        condition(
            TYPE,
            false,
            Some("ContainersNotReady"),
            Some(messages.join(", ")),
        )
    }
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
    if messages.is_empty() {
        condition("Ready", true, None, None)
    } else {
        condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(messages.join(", ")),
        )
    }
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
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        condition(TYPE, true, None, None)
    } else {
        condition(
            TYPE,
            false,
            Some("ContainersNotInitialized"),
            Some(messages.join(", ")),
        )
    }
}
