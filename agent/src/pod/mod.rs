//! The pod worker's pure core: observed state, the per-pass plan, restart back-off and the
//! status the worker writes.

pub mod container_config;
pub mod events;
pub mod hooks;
pub mod manager;
pub mod model;
pub mod plan;
pub mod prober;
pub mod restart;
pub mod status;
pub mod volumes;
pub mod worker;

pub use model::{
    Attempt, ContainerId, ContainerKind, Deletion, ImagePull, Observed, ObservedContainer,
    ProbeResults, PullFailure, RestartPolicy, Sandbox, StartError, State, Termination,
};
pub use plan::{Action, KillReason, KillTarget, PodKillReason, PodPlan, plan_pod};
pub use restart::{Backoff, CrashLoop, crash_loop, image_pull_failed, next_start};
pub use status::{pod_phase, pod_status};
