//! Berth's control plane: the Kubernetes-compatible API server over the revisioned store, and
//! the controllers that run beside it.

pub mod api;
pub mod backup;
pub mod certificates;
pub mod controllers;
pub mod events;
pub mod informer;
pub mod join;
pub mod kubernetes_service;
pub mod leader_election;
pub mod local_path_class;
pub mod pki;
pub mod priority;
pub mod rbac;
pub mod registry;
pub mod scheduler;
pub mod server;
pub mod serviceaccount;
pub mod store;
#[cfg(test)]
pub mod testing;
