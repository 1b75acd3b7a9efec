//! CertificateSigningRequests in the registry's write path: who asked (the writer's
//! [`Identity`](crate::identity::Identity)), the parsed PKCS#10 request ([`request`]),
//! admission ([`admission`]) and the status strategy ([`strategy`]). The signers, the approver and the controller's serving certificate live with
//! the controller binary, above the registry.

pub mod admission;
pub mod request;
pub mod strategy;

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
