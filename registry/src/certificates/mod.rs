//! CertificateSigningRequests in the registry's write path: who asked ([`Requestor`]), the
//! parsed PKCS#10 request ([`request`]), admission ([`admission`]) and the status strategy
//! ([`strategy`]). The signers, the approver and the controller's serving certificate live with
//! the controller binary, above the registry.

pub mod admission;
pub mod request;
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
