//! The pods of this node. The pure core — observed state ([`model`]), the sandbox's health
//! ([`sandbox`]), the per-pass plan ([`plan`]), restart back-off ([`restart`]) and the status
//! the worker writes ([`status`]) — and around it: the containerd label schema ([`labels`]), the
//! worker's ports ([`ports`]), the per-pod [`worker`], the [`manager`] that dispatches to the
//! workers, and the log/exec [`backend`] of the agent's server.

pub mod api_access;
pub mod backend;
pub mod cache;
pub mod claims;
pub mod config_objects;
pub mod container_config;
pub mod events;
#[cfg(test)]
pub(crate) mod fake;
pub mod hooks;
pub mod host_path;
pub mod host_security;
pub mod labels;
pub mod manager;
pub mod model;
pub mod plan;
pub mod ports;
pub mod prober;
pub mod qos;
pub mod restart;
pub mod sandbox;
pub mod security_profiles;
pub mod service_links;
pub mod starting;
pub mod status;
pub mod sysctls;
pub mod volumes;
pub mod worker;

pub use model::{
    Attempt, ContainerId, ContainerKind, Deletion, ImagePull, Observed, ObservedContainer,
    ProbeResults, PullFailure, RestartPolicy, Sandbox, SandboxFault, StartError, State,
    Termination,
};
pub use plan::{Action, KillReason, KillTarget, PodKillReason, PodPlan, plan_pod};
pub use restart::{
    Backoff, CrashLoop, CrashLoopBackOff, crash_loop, image_pull_failed, next_start,
};
pub use status::{pod_phase, pod_status};
