//! The ControllerRevision history of a workload that keeps its templates' versions (DaemonSets
//! and StatefulSets; upstream `pkg/controller/history` with each controller's
//! `constructHistory`/`getStatefulSetRevisions` and `cleanupHistory`/`truncateHistory`): the
//! revision whose data is the current template's is the current one (a rollback to an old
//! template finds its old revision and renumbers it max + 1, so `kubectl rollout history` shows
//! it last); without one a new revision `<owner>-<hash>` numbered max + 1 is created; duplicates
//! of the current one (two passes racing) are folded into the newest; old revisions beyond
//! `revisionHistoryLimit` go, oldest first, unless a pod still carries them.
//!
//! Planner: pure, no I/O.

pub mod data;
pub mod write;

use crate::deployment::template::compute_hash;
use crate::views::{ControllerRef, controller_of, string_map};
use berth_runtime::informer::{Object, View};
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::resource::ResourceType;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The workload whose history this is, as the history needs it.
#[derive(Debug, Clone)]
pub struct Owner<'a> {
    /// Its resource type (whose status keeps `collisionCount`).
    pub resource: &'static ResourceType,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    /// Its controller reference, which its revisions carry.
    pub controller_ref: Value,
    /// `spec.template` as stored.
    pub template: &'a Value,
    /// The same, typed, for hashing.
    pub pod_template: &'a core::PodTemplateSpec,
    pub collision_count: Option<i32>,
    pub history_limit: i32,
    /// Its annotations, copied onto new revisions (where `rollout history` finds the change
    /// cause).
    pub annotations: &'a BTreeMap<String, String>,
    /// The label a revision's hash is kept under.
    pub hash_label: &'static str,
}

impl Owner<'_> {
    /// The revision data of the current template (see [`data::template_patch`]).
    pub fn revision_data(&self) -> Value {
        data::template_patch(self.template)
    }

    /// The hash naming the current template's revision (upstream `ComputeHash` over the
    /// template and `status.collisionCount`).
    pub fn template_hash(&self) -> String {
        compute_hash(self.pod_template, self.collision_count)
    }

    /// The name of the revision of this hash: `<owner>-<hash>`.
    pub fn revision_name(&self, hash: &str) -> String {
        format!("{}-{hash}", self.name)
    }

    /// A new ControllerRevision of the template, numbered `number`, named `<owner>-<hash>`,
    /// labelled with the template's labels and the hash, annotated with the owner's annotations.
    pub fn new_revision(&self, hash: &str, number: i64) -> Value {
        let mut labels = self
            .pod_template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(self.hash_label.into(), hash.into());
        let mut meta = Map::new();
        meta.insert("name".into(), json!(self.revision_name(hash)));
        meta.insert("namespace".into(), json!(self.namespace));
        meta.insert("labels".into(), json!(labels));
        if !self.annotations.is_empty() {
            meta.insert("annotations".into(), json!(self.annotations));
        }
        meta.insert("ownerReferences".into(), json!([self.controller_ref]));
        json!({
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": meta,
            "data": self.revision_data(),
            "revision": number,
        })
    }
}

/// A ControllerRevision, as the history needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub revision: i64,
    pub data: Value,
    pub controller: Option<ControllerRef>,
    pub deleting: bool,
}

impl Revision {
    /// Reads a stored ControllerRevision.
    pub fn from_value(obj: &Value) -> Revision {
        let s = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Revision {
            name: s("/metadata/name"),
            uid: s("/metadata/uid"),
            labels: string_map(obj.pointer("/metadata/labels")),
            revision: obj.get("revision").and_then(Value::as_i64).unwrap_or(0),
            data: obj.get("data").cloned().unwrap_or(Value::Null),
            controller: controller_of(obj),
            deleting: obj.pointer("/metadata/deletionTimestamp").is_some(),
        }
    }

    /// Its hash: the `label` label, or its name when that is missing (upstream does the same,
    /// so no hash needs recomputing).
    pub fn hash(&self, label: &str) -> &str {
        self.labels
            .get(label)
            .map_or(self.name.as_str(), String::as_str)
    }
}

impl View for Revision {
    fn derive(obj: &Object) -> Self {
        crate::workload::parsed::or_else(obj, Revision::from_value, || Revision {
            name: obj.name().to_string(),
            uid: obj.uid().to_string(),
            labels: obj.labels().clone(),
            revision: 0,
            data: Value::Null,
            controller: None,
            deleting: obj.is_deleting(),
        })
    }
}

/// The current revision: found, or to be created.
#[derive(Debug, Clone, PartialEq)]
pub enum Current {
    /// This one; `renumber` when its number must become max + 1.
    Found {
        revision: Arc<Revision>,
        renumber: Option<i64>,
    },
    /// None matches: create this ControllerRevision (named `<owner>-<hash>`).
    Create { hash: String, object: Value },
}

impl Current {
    /// Its hash (what daemon pods are labelled with).
    pub fn hash(&self, label: &str) -> String {
        match self {
            Current::Found { revision, .. } => revision.hash(label).to_string(),
            Current::Create { hash, .. } => hash.clone(),
        }
    }

    /// Its name (what StatefulSet pods are labelled with).
    pub fn name(&self) -> String {
        match self {
            Current::Found { revision, .. } => revision.name.clone(),
            Current::Create { object, .. } => object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// What the history needs done before pods are looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub current: Current,
    /// Revisions lacking the hash label: they get their name as hash.
    pub label: Vec<Arc<Revision>>,
    /// Other revisions matching the template: delete them (after relabelling their pods).
    pub duplicates: Vec<Arc<Revision>>,
    /// The old revisions, oldest first.
    pub old: Vec<Arc<Revision>>,
}

/// Sorts the claimed revisions against the owner's template.
pub fn plan(owner: &Owner<'_>, revisions: &[Arc<Revision>]) -> History {
    let data = owner.revision_data();
    let label = revisions
        .iter()
        .filter(|r| !r.labels.contains_key(owner.hash_label))
        .cloned()
        .collect();
    let (mut current, mut old): (Vec<_>, Vec<_>) =
        revisions.iter().cloned().partition(|r| r.data == data);
    old.sort_by(|a, b| a.revision.cmp(&b.revision).then(a.name.cmp(&b.name)));
    let next = old.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
    // The newest of the matching ones is kept (upstream keeps the last of equal numbers).
    current.sort_by(|a, b| a.revision.cmp(&b.revision).then(a.name.cmp(&b.name)));
    let kept = current.pop();
    let found = match kept {
        Some(revision) => Current::Found {
            renumber: (revision.revision < next).then_some(next),
            revision,
        },
        None => {
            let hash = owner.template_hash();
            Current::Create {
                object: owner.new_revision(&hash, next),
                hash,
            }
        }
    };
    History {
        current: found,
        label,
        duplicates: current,
        old,
    }
}

/// The old revisions to delete: beyond the history limit, oldest first, skipping those `live`
/// says a pod (finished ones included) or the owner's status still refers to.
pub fn cleanup(
    owner: &Owner<'_>,
    old: &[Arc<Revision>],
    live: impl Fn(&Revision) -> bool,
) -> Vec<Arc<Revision>> {
    let keep = usize::try_from(owner.history_limit).unwrap_or(0);
    let mut excess = old.len().saturating_sub(keep);
    let mut out = Vec::new();
    for r in old {
        if excess == 0 {
            break;
        }
        if live(r) {
            continue;
        }
        out.push(r.clone());
        excess -= 1;
    }
    out
}

/// The hashes (under `label`) of the revisions in `live_hashes`: a predicate for [`cleanup`].
pub fn by_hash<'a>(label: &'a str, live: &'a BTreeSet<String>) -> impl Fn(&Revision) -> bool + 'a {
    move |r| live.contains(r.hash(label))
}

#[cfg(test)]
mod tests;
