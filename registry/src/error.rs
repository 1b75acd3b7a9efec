//! The registry's errors: what a write or read through the object service can fail with, in
//! Kubernetes' terms (the API layer maps each to its HTTP status and `Status` body; controllers
//! match on them and ask each how to retry).

use berth_shared::admission::{self, FieldError};
use berth_shared::reconcile::{ErrorPolicy, Retry};
use berth_shared::resource::ResourceType;
use berth_store::StoreError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum RegistryError {
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        resource: String,
        group: String,
        name: String,
    },
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        resource: String,
        group: String,
        name: String,
    },
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    Conflict {
        resource: String,
        group: String,
        name: String,
        detail: String,
    },
    #[error("{}", invalid_message(.kind, .group, .name, .causes))]
    Invalid {
        kind: String,
        group: String,
        name: String,
        causes: Vec<FieldError>,
    },
    /// The request itself is malformed (wrong kind, namespace mismatch, undecodable body).
    #[error("{0}")]
    BadRequest(String),
    /// Refused by policy (for example content in a terminating namespace).
    #[error("{0}")]
    Forbidden(String),
    /// The subresource or operation does not exist for this kind.
    #[error("the server could not find the requested resource")]
    UnknownPath,
    /// A revision older than the store's history.
    #[error("{0}")]
    Gone(String),
    /// A create whose body carries a resourceVersion. Upstream's storage refuses it with a plain
    /// error (`storage.ErrResourceVersionSetOnCreate`), which kube-apiserver answers as a 500
    /// with no reason.
    #[error("resourceVersion should not be set on objects to be created")]
    ResourceVersionOnCreate,
    /// Refused by a ValidatingAdmissionPolicy: upstream's `admission.NewForbidden` message with
    /// the reason (and code) the failed validation names, `Invalid` (422) by default.
    #[error("{resource} \"{name}\" is forbidden: {detail}")]
    PolicyDenied {
        resource: String,
        group: String,
        name: String,
        reason: &'static str,
        code: u16,
        /// `ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...`, also the
        /// Status's one cause.
        detail: String,
    },
    /// Refused by an admission webhook: upstream's `ToStatusErr`, the webhook's own code (at
    /// least 400) and reason, `admission webhook "x" denied the request: <message>`.
    #[error("{message}")]
    WebhookDenied {
        code: u16,
        reason: &'static str,
        message: String,
    },
    /// The store failed (disk, encoding).
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// The store cannot be reached (etcd without quorum); nothing was written.
    #[error("{0}")]
    Unavailable(String),
    /// A write whose outcome the store could not learn: upstream's 504 Timeout ("may still
    /// be processing the request").
    #[error("{0}")]
    Timeout(String),
}

/// The message of a 422 Invalid error, as kube-apiserver words it.
pub fn invalid_message(kind: &str, group: &str, name: &str, causes: &[FieldError]) -> String {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    admission::invalid_message(&qualified, name, causes)
}

pub(crate) const CONFLICT_DETAIL: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

impl RegistryError {
    /// A create refused because the namespace is being deleted (nothing can be made there;
    /// controllers do not count it as a failure).
    pub fn is_namespace_terminating(&self) -> bool {
        matches!(self, RegistryError::Forbidden(m) if m.contains("because it is being terminated"))
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> RegistryError {
        RegistryError::NotFound {
            resource: rt.group_resource(),
            group: rt.group.to_string(),
            name: name.to_string(),
        }
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> RegistryError {
        RegistryError::AlreadyExists {
            resource: rt.group_resource(),
            group: rt.group.to_string(),
            name: name.to_string(),
        }
    }

    pub fn conflict(rt: &ResourceType, name: &str) -> RegistryError {
        RegistryError::conflict_because(rt, name, CONFLICT_DETAIL)
    }

    pub fn conflict_because(rt: &ResourceType, name: &str, detail: &str) -> RegistryError {
        RegistryError::Conflict {
            resource: rt.group_resource(),
            group: rt.group.to_string(),
            name: name.to_string(),
            detail: detail.to_string(),
        }
    }

    pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<FieldError>) -> RegistryError {
        RegistryError::Invalid {
            kind: rt.kind.to_string(),
            group: rt.group.to_string(),
            name: name.to_string(),
            causes,
        }
    }

    /// Whether retrying the same operation later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            RegistryError::Conflict { .. }
                | RegistryError::Internal(_)
                | RegistryError::Unavailable(_)
                | RegistryError::Timeout(_)
        )
    }
}

impl ErrorPolicy for RegistryError {
    fn retry(&self) -> Retry {
        match self {
            RegistryError::Conflict { .. } | RegistryError::AlreadyExists { .. } => Retry::Now,
            RegistryError::Internal(_)
            | RegistryError::Unavailable(_)
            | RegistryError::Timeout(_)
            | RegistryError::Gone(_) => Retry::Backoff,
            // The object may appear, the namespace may be recreated, the input may be fixed:
            // only a change brings the key back.
            RegistryError::NotFound { .. }
            | RegistryError::Invalid { .. }
            | RegistryError::BadRequest(_)
            | RegistryError::Forbidden(_)
            | RegistryError::PolicyDenied { .. }
            | RegistryError::WebhookDenied { .. }
            | RegistryError::UnknownPath
            | RegistryError::ResourceVersionOnCreate => Retry::Never,
        }
    }
}

impl From<StoreError> for RegistryError {
    fn from(e: StoreError) -> RegistryError {
        match e {
            StoreError::Compacted { .. } => RegistryError::Gone(e.to_string()),
            StoreError::Unavailable(m) => RegistryError::Unavailable(m),
            e @ StoreError::OutcomeUnknown(_) => RegistryError::Timeout(e.to_string()),
            other => RegistryError::Internal(other.to_string()),
        }
    }
}

impl From<serde_json::Error> for RegistryError {
    fn from(e: serde_json::Error) -> RegistryError {
        RegistryError::Internal(e.to_string())
    }
}
