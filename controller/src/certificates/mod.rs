//! Certificates that renew themselves: the `certificates.k8s.io/v1` CertificateSigningRequest
//! API's server side ([`admission`], [`strategy`]), the cluster CA's signers ([`signer`],
//! upstream's csrsigning) and auto-approval of nodes' own requests ([`approver`], upstream's
//! csrapproving) run by [`controller`]; the controller's own serving certificate renewed in
//! place ([`serving`], timed by [`rotation`]); the default RBAC for CSRs ([`rbac`]); and the
//! CA's expiry warning ([`expiry`]).

pub mod admission;
pub mod approver;
pub mod controller;
pub mod expiry;
pub mod rbac;
pub mod request;
pub mod rotation;
pub mod serving;
pub mod signer;
pub mod strategy;

use std::collections::BTreeMap;

/// Client certificates of nodes (kubelets): CN `system:node:<name>`, O `system:nodes`.
pub const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Serving certificates of nodes (their port 10250).
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
/// Client certificates of users and components.
pub const APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// The prefix of node user names.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The group of node credentials.
pub const NODES_GROUP: &str = "system:nodes";

/// Who made a request: the authenticated user a CSR's `spec.username`, `uid`, `groups` and
/// `extra` are filled from at create (clients cannot choose them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requestor {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Requestor {
    /// The node name of a node credential (`system:node:<name>` in group `system:nodes`).
    pub fn node(&self) -> Option<&str> {
        if !self.groups.iter().any(|g| g == NODES_GROUP) {
            return None;
        }
        self.user.strip_prefix(NODE_USER_PREFIX)
    }
}
