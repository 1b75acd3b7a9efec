//! Berth's control plane: the Kubernetes-compatible API server over the revisioned store, and
//! the controllers that run beside it.

pub mod store;
