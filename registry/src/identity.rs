//! Who makes a request: the user authentication found (from a client certificate, a token or
//! impersonation), as the API server authorizes it and as the registry records it (a
//! CertificateSigningRequest's requestor).

use crate::certificates::{NODE_USER_PREFIX, NODES_GROUP};
use std::collections::BTreeMap;

/// The group every authenticated identity belongs to.
pub const AUTHENTICATED: &str = "system:authenticated";

/// Who is making a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Identity {
    pub fn new(user: impl Into<String>, groups: Vec<String>) -> Identity {
        Identity {
            user: user.into(),
            groups,
            ..Default::default()
        }
    }

    /// Adds `system:authenticated` unless it is there.
    pub fn authenticated(mut self) -> Identity {
        if !self.groups.iter().any(|g| g == AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_string());
        }
        self
    }

    /// The node name of a node credential (`system:node:<name>` in group `system:nodes`).
    pub fn node(&self) -> Option<&str> {
        if !self.groups.iter().any(|g| g == NODES_GROUP) {
            return None;
        }
        self.user.strip_prefix(NODE_USER_PREFIX)
    }
}
