//! `metadata.managedFields`: which field manager owns which fields, as kube-apiserver's
//! structured-merge-diff records and enforces it. A write's manager is its `fieldManager`
//! parameter or its client's user-agent (`kubectl-set`, `kubectl-client-side-apply`,
//! `kubectl`…); sets are upstream's `FieldsV1` form. Updates ([`record`]) take what they
//! change from everyone; server-side apply ([`apply`]) merges a configuration, prunes what
//! its applier stopped applying and refuses (or, forced, takes) fields other managers own.
//!
//! What a list or object is comes from a [`FieldSchema`]: [`BuiltIn`] for the built-in
//! kinds, a custom resource's own schema for its kind.

mod apply;
mod compare;
mod conflict;
mod entries;
mod last_applied;
mod merge;
mod schema;
mod set;
mod update;

pub use apply::apply;
pub use conflict::{Conflict, Conflicts};
pub use schema::{BuiltIn, FieldSchema, ListType};
pub use update::record_with;

use serde_json::Value;

use crate::resource::ResourceType;

/// Who writes, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer<'a> {
    pub manager: &'a str,
    /// `Update`, or `Apply` for server-side apply.
    pub operation: &'a str,
    /// `status`, `scale`… or `None` for the object itself.
    pub subresource: Option<&'a str>,
    /// The apiVersion the write was made in.
    pub api_version: &'a str,
    /// When (RFC 3339, seconds).
    pub time: &'a str,
    /// The kind's `status` is written through its own subresource (so a write of the object
    /// itself owns no status field).
    pub status_subresource: bool,
}

/// The manager name upstream derives from a user-agent: what comes before the first `/`
/// (`kubectl/v1.33.0 (linux/amd64) …` is `kubectl`).
pub fn manager_from_user_agent(user_agent: &str) -> String {
    let name = user_agent.split('/').next().unwrap_or_default().trim();
    name.chars().take(128).collect()
}

/// The schema objects of `rt` merge and are owned by: a custom resource's structural schema,
/// else the built-in table (a custom resource whose schema does not parse has atomic lists).
pub fn schema_for(rt: &ResourceType) -> Box<dyn FieldSchema> {
    match crate::custom::served(rt).and_then(|s| s.structural.clone()) {
        Some(structural) => Box::new(structural),
        None => Box::new(BuiltIn { kind: rt.kind }),
    }
}

/// Records `writer`'s update of `new` (over `old`, none for a create) of a built-in `kind`
/// ([`record_with`] its schema).
pub fn record(kind: &str, old: Option<&Value>, new: &mut Value, writer: &Writer) {
    record_with(&BuiltIn { kind }, old, new, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agents_name_managers_as_upstream_does() {
        assert_eq!(
            manager_from_user_agent("kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
            "kubectl"
        );
        assert_eq!(
            manager_from_user_agent("kubectl.1.32/v1.32.5"),
            "kubectl.1.32"
        );
        assert_eq!(
            manager_from_user_agent("OpenAPI-Generator/37.0.2/python"),
            "OpenAPI-Generator"
        );
    }
}
