//! `BackOff` events (pure): which containers entered a back-off between the status the API
//! holds and the one about to be written, with the kubelet's messages — `Back-off restarting
//! failed container …` (Warning) when a container enters `CrashLoopBackOff`, `Back-off pulling
//! image "…"` (Normal) when it enters `ImagePullBackOff`. One event per entry into a back-off;
//! the recorder folds repeats into its count.
//!
//! Planner: pure, no I/O.

use berth_api::k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

/// One `BackOff` event to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackOffEvent {
    pub warning: bool,
    pub message: String,
    /// `spec.containers{name}` or `spec.initContainers{name}`.
    pub field_path: String,
}

fn waiting_reason(s: &ContainerStatus) -> Option<&str> {
    s.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}

/// The `BackOff` events for containers whose waiting reason became `CrashLoopBackOff` or
/// `ImagePullBackOff` from `old` to `new`.
pub fn backoff_events(pod: &Pod, old: Option<&PodStatus>, new: &PodStatus) -> Vec<BackOffEvent> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let lists = |s: &PodStatus| {
        [
            ("initContainers", s.init_container_statuses.clone()),
            ("containers", s.container_statuses.clone()),
        ]
    };
    let old_lists = old.map(lists);
    let mut events = Vec::new();
    for (i, (field, statuses)) in lists(new).into_iter().enumerate() {
        for s in statuses.iter().flatten() {
            let reason = waiting_reason(s);
            let before = old_lists
                .as_ref()
                .and_then(|l| l[i].1.as_ref())
                .and_then(|l| l.iter().find(|o| o.name == s.name))
                .and_then(waiting_reason);
            if reason == before {
                continue;
            }
            let (warning, message) = match reason {
                Some("CrashLoopBackOff") => (
                    true,
                    format!(
                        "Back-off restarting failed container {} in pod {name}_{ns}({uid})",
                        s.name
                    ),
                ),
                Some("ImagePullBackOff") => {
                    (false, format!("Back-off pulling image \"{}\"", s.image))
                }
                _ => continue,
            };
            events.push(BackOffEvent {
                warning,
                message,
                field_path: format!("spec.{field}{{{}}}", s.name),
            });
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateWaiting,
    };

    fn pod() -> Pod {
        Pod {
            metadata: crate::pod::model::fixtures::web("prod", "u-1"),
            ..Default::default()
        }
    }

    fn waiting(name: &str, reason: &str) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            image: "nginx:1.161".into(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.into()),
                    message: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn running(name: &str) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            image: "nginx:1.161".into(),
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn status(init: Vec<ContainerStatus>, apps: Vec<ContainerStatus>) -> PodStatus {
        PodStatus {
            init_container_statuses: Some(init),
            container_statuses: Some(apps),
            ..Default::default()
        }
    }

    #[test]
    fn entering_crash_loop_back_off_is_a_warning_naming_the_pod() {
        let old = status(vec![], vec![running("main")]);
        let new = status(vec![], vec![waiting("main", "CrashLoopBackOff")]);
        assert_eq!(
            backoff_events(&pod(), Some(&old), &new),
            vec![BackOffEvent {
                warning: true,
                message: "Back-off restarting failed container main in pod web_prod(u-1)".into(),
                field_path: "spec.containers{main}".into(),
            }]
        );
    }

    #[test]
    fn entering_image_pull_back_off_is_normal_and_names_the_image() {
        let old = status(vec![waiting("setup", "ErrImagePull")], vec![]);
        let new = status(vec![waiting("setup", "ImagePullBackOff")], vec![]);
        assert_eq!(
            backoff_events(&pod(), Some(&old), &new),
            vec![BackOffEvent {
                warning: false,
                message: "Back-off pulling image \"nginx:1.161\"".into(),
                field_path: "spec.initContainers{setup}".into(),
            }]
        );
    }

    #[test]
    fn staying_in_back_off_or_other_waiting_reasons_record_nothing() {
        let crash = status(vec![], vec![waiting("main", "CrashLoopBackOff")]);
        assert!(backoff_events(&pod(), Some(&crash), &crash).is_empty());
        let creating = status(vec![], vec![waiting("main", "ContainerCreating")]);
        assert!(backoff_events(&pod(), None, &creating).is_empty());
    }

    #[test]
    fn a_first_status_already_in_back_off_is_recorded() {
        let new = status(vec![], vec![waiting("main", "CrashLoopBackOff")]);
        assert_eq!(backoff_events(&pod(), None, &new).len(), 1);
    }
}
