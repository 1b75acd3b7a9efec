//! The default RBAC objects for CertificateSigningRequests, as upstream's bootstrap policy
//! names them: who may ask for node client certificates (`…:nodeclient`,
//! `…:selfnodeclient`: the permissions the auto-approver's SubjectAccessReview asks about),
//! who may approve for each built-in signer (`…-approver`), `system:node-bootstrapper`; and
//! one binding upstream leaves to the installer (kubeadm's
//! `kubeadm:node-autoapprove-certificate-rotation`): `selfnodeclient` for `system:nodes`, so
//! nodes' renewals of their own client certificates are approved.
//!
//! Nodes create, read, list and watch CSRs through the node authorizer (upstream's node rules).

use crate::rbac::bootstrap::{binding, cluster_role, rule};
use serde_json::{Value, json};

const GROUP: &str = "certificates.k8s.io";
pub const SELF_NODE_CLIENT: &str =
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient";
const NODE_CLIENT: &str = "system:certificates.k8s.io:certificatesigningrequests:nodeclient";

fn approver(signer: &str) -> Value {
    json!({"verbs": ["approve"], "apiGroups": [GROUP], "resources": ["signers"],
           "resourceNames": [signer]})
}

/// The CSR cluster roles.
pub fn cluster_roles() -> Vec<Value> {
    vec![
        cluster_role(
            NODE_CLIENT,
            json!({}),
            vec![rule(
                &["create"],
                &[GROUP],
                &["certificatesigningrequests/nodeclient"],
            )],
            None,
        ),
        cluster_role(
            SELF_NODE_CLIENT,
            json!({}),
            vec![rule(
                &["create"],
                &[GROUP],
                &["certificatesigningrequests/selfnodeclient"],
            )],
            None,
        ),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            json!({}),
            vec![approver(super::APISERVER_CLIENT)],
            None,
        ),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            json!({}),
            vec![approver(super::KUBELET_CLIENT)],
            None,
        ),
        cluster_role(
            "system:certificates.k8s.io:kubelet-serving-approver",
            json!({}),
            vec![approver(super::KUBELET_SERVING)],
            None,
        ),
        cluster_role(
            "system:node-bootstrapper",
            json!({}),
            vec![rule(
                &["create", "get", "list", "watch"],
                &[GROUP],
                &["certificatesigningrequests"],
            )],
            None,
        ),
    ]
}

/// The CSR cluster role bindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![binding(
        SELF_NODE_CLIENT,
        SELF_NODE_CLIENT,
        &[super::NODES_GROUP],
    )]
}
