//! Certificates that renew themselves: the `certificates.k8s.io/v1` CertificateSigningRequest
//! API's server side ([`admission`], [`strategy`]), the cluster CA's signers ([`signer`],
//! upstream's csrsigning) and auto-approval of nodes' own requests ([`approver`], upstream's
//! csrapproving) run by [`controller`]; the controller's own serving certificate renewed in
//! place ([`serving`], timed by [`rotation`]); the default RBAC for CSRs ([`rbac`]); and the
//! CA's expiry warning ([`expiry`]).

pub mod approval;
pub mod approver;
pub mod controller;
pub mod expiry;
pub mod rbac;
pub mod rotation;
pub mod serving;
pub mod signer;

// The write path's side of CSRs (admission, strategy, the parsed request) and the names the
// rest of this module shares with it live in the registry, below everything that writes.
pub use berth_registry::certificates::{
    APISERVER_CLIENT, KUBELET_CLIENT, KUBELET_SERVING, NODE_USER_PREFIX, NODES_GROUP, admission,
    request, strategy,
};
