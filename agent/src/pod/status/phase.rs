//! The pod phase from the container statuses: the kubelet's `getPhase`, plus the two
//! "has the pod been initialized" questions it and the status manager ask.
//!
//! Planner: pure, no I/O.

use berth_api::k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, PodSpec,
};

use super::{FAILED, PENDING, RUNNING, SUCCEEDED};
use crate::pod::model::{RestartPolicy, is_sidecar};

pub(super) fn state_of(s: &ContainerStatus) -> ContainerState {
    s.state.clone().unwrap_or_default()
}

pub(super) fn last_exit(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref())
}

/// Whether any app container has run (running or terminated): the pod initialized before.
pub(super) fn any_regular_started(app: &[ContainerStatus]) -> bool {
    app.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    })
}

/// Whether the pod got past initialization at some point (status manager's `hasPodInitialized`).
pub(super) fn has_initialized(
    spec: &PodSpec,
    init: &[ContainerStatus],
    app: &[ContainerStatus],
) -> bool {
    let Some(last) = spec.init_containers.as_ref().and_then(|i| i.last()) else {
        return true;
    };
    let left_waiting = |s: &ContainerStatus| {
        last_exit(s).is_some() || s.state.as_ref().is_none_or(|st| st.waiting.is_none())
    };
    if app.iter().any(left_waiting) {
        return true;
    }
    let Some(s) = init.iter().find(|s| s.name == last.name) else {
        return false;
    };
    let st = state_of(s);
    if is_sidecar(last) {
        return st.running.is_some() && s.started == Some(true);
    }
    let completed = |t: Option<&ContainerStateTerminated>| {
        t.is_some_and(|t| t.reason.as_deref() == Some("Completed"))
    };
    completed(last_exit(s)) || completed(st.terminated.as_ref())
}

/// The kubelet's `getPhase`.
pub(super) fn phase(
    spec: &PodSpec,
    init: &[ContainerStatus],
    app: &[ContainerStatus],
    terminal: bool,
) -> &'static str {
    let find =
        |list: &'_ [ContainerStatus], name: &str| list.iter().find(|s| s.name == name).cloned();
    let (mut pending_init, mut failed_init) = (0, 0);
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in spec.init_containers.iter().flatten() {
        let Some(s) = find(init, &c.name) else {
            if is_sidecar(c) {
                unknown += 1;
            } else {
                pending_init += 1;
            }
            continue;
        };
        let st = state_of(&s);
        if is_sidecar(c) {
            // Sidecars never count for completion; they only hold initialization back.
            if st.running.is_some() {
                if s.started != Some(true) {
                    pending_init += 1;
                }
                running += 1;
            } else if st.terminated.is_some() {
            } else if st.waiting.is_some() {
                if last_exit(&s).is_none() {
                    pending_init += 1;
                    waiting += 1;
                }
            } else {
                pending_init += 1;
                unknown += 1;
            }
        } else if let Some(t) = st.terminated.as_ref() {
            failed_init += i32::from(t.exit_code != 0);
        } else if st.waiting.is_some() && last_exit(&s).is_some() {
            failed_init += i32::from(last_exit(&s).is_some_and(|t| t.exit_code != 0));
        } else {
            pending_init += 1;
        }
    }
    for c in &spec.containers {
        let Some(s) = find(app, &c.name) else {
            unknown += 1;
            continue;
        };
        let st = state_of(&s);
        if st.running.is_some() {
            running += 1;
        } else if let Some(t) = st.terminated.as_ref() {
            stopped += 1;
            succeeded += i32::from(t.exit_code == 0);
        } else if st.waiting.is_some() {
            if last_exit(&s).is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    let policy = RestartPolicy::of(spec);
    if failed_init > 0 && policy == RestartPolicy::Never {
        return FAILED;
    }
    if (pending_init > 0 && !any_regular_started(app)) || waiting > 0 {
        return PENDING;
    }
    if running > 0 && unknown == 0 {
        return RUNNING;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        return match (terminal, policy, stopped == succeeded) {
            (true, _, true) => SUCCEEDED,
            (true, _, false) => FAILED,
            (false, RestartPolicy::Always, _) => RUNNING,
            (false, _, true) => SUCCEEDED,
            (false, RestartPolicy::Never, false) => FAILED,
            (false, RestartPolicy::OnFailure, false) => RUNNING,
        };
    }
    PENDING
}
