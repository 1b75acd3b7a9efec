//! What Berth's agent and controller both need, and nothing only the server needs: the
//! Kubernetes wire types (re-exported from `k8s-openapi`), the resource table, label and field
//! selectors, quantities, the scheduling predicates, the pod QoS class, which Ingresses are
//! Berth's, the local-path provisioner's names, the reconcile runtime, private file modes, and
//! (features) the HTTPS API client and the binaries' log set-up. The server-only layer
//! (admission, OpenAPI, tables, patches, protobuf) is `berth-shared`, which re-exports all of
//! this at the same paths.

pub use k8s_openapi;

#[cfg(feature = "client")]
pub mod client;
pub mod ingress_class;
pub mod interner;
pub mod local_path;
#[cfg(feature = "logging")]
pub mod logging;
pub mod private_files;
pub mod qos;
pub mod quantity;
pub mod reconcile;
pub mod resource;
pub mod scheduling;
pub mod selector;
