//! Berth's shared API layer: the Kubernetes wire types (re-exported from `k8s-openapi`) and
//! everything both the controller and the agent need to reason about them without I/O.

pub use k8s_openapi;

pub mod admission;
pub mod body;
#[cfg(feature = "client")]
pub mod client;
pub mod conversion;
pub mod cron;
pub mod discovery;
#[cfg(feature = "logging")]
pub mod logging;
pub mod managed_fields;
pub mod openapi;
pub mod patch;
pub mod private_files;
pub mod protobuf;
pub mod quantity;
pub mod query;
pub mod reconcile;
pub mod resource;
pub mod scheduling;
pub mod selector;
pub mod table;
