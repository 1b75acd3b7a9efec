//! Placement predicates the scheduler and the agent's admission both need, with upstream
//! Kubernetes' semantics: taints and tolerations, node selectors and node affinity, resource
//! requests (the init-container rule) and allocatable resources, host ports. Pure functions
//! over compiled forms of the API types.

pub mod node_affinity;
pub mod ports;
pub mod resources;
pub mod taints;

pub use node_affinity::{PinnedNodes, PreferredNodeAffinity, RequiredNodeAffinity};
pub use ports::HostPort;
pub use resources::Resources;
pub use taints::{Taint, TaintEffect, Toleration};
