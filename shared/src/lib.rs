//! Berth's server-side API layer: admission (defaults, validation, Pod Security), request
//! bodies and query options, protobuf, patches and managed fields, version conversion,
//! discovery, OpenAPI documents, Table printers and cron schedules. What the agent needs as
//! well (API types, selectors, quantities, the client, the reconcile runtime) is `berth-api`,
//! re-exported here at the paths it had when it lived in this crate.

pub use k8s_openapi;

#[cfg(feature = "client")]
pub use berth_api::client;
#[cfg(feature = "logging")]
pub use berth_api::logging;
pub use berth_api::{
    ingress_class, interner, private_files, quantity, reconcile, resource, scheduling, selector,
};

pub mod admission;
pub mod body;
pub mod cel;
pub mod cidr;
pub mod conversion;
pub mod cron;
pub mod custom;
pub mod discovery;
mod go_duration;
pub mod managed_fields;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod query;
pub mod schema;
pub mod table;
