//! The claim engine (upstream's `ControllerRefManager.ClaimObject` and its `canAdoptFunc`):
//! an owner keeps what it controls while its selector still matches, releases what it controls
//! that stopped matching, adopts orphans that match, and leaves alone what another controller
//! owns. An owner being deleted neither adopts nor releases; an orphan being deleted is not
//! adopted. Before adopting, the owner is read again from the registry, not the cache (upstream
//! `RecheckDeletionTimestamp`): one gone, replaced by another of the same name, or being deleted
//! adopts nothing. The controllers' own rules are [`Rules`]: the ReplicaSet claims active pods
//! only, the Job puts its tracking finalizer on what it adopts and takes it off what it releases.
//! A controller whose plan assumes its adoptions (the Deployment) adopts with
//! [`Owner::adopt_planned`], which fails the pass instead.

use super::controller_ref::{ControllerRef, controller_uid};
use super::{SyncError, write};
use crate::views::string_map;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ORPHANS_BY_NAMESPACE, Object, View};
use berth_shared::resource::ResourceType;
use berth_shared::selector::LabelSelector;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What to do about one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Ours, and matching.
    Owned,
    /// An orphan to adopt.
    Adopt,
    /// Ours but no longer matching: drop our reference.
    Release,
    /// Someone else's, an orphan we do not want, or not to be touched now.
    Ignore,
}

/// A controller's own claiming rules, on top of upstream's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// Only active objects (not finished, not being deleted) are claimed at all, owned ones
    /// included (the ReplicaSet's `FilterActivePods`).
    pub active_only: bool,
    /// Put on what is adopted, taken off what is released (the Job's tracking finalizer).
    pub finalizer: Option<&'static str>,
}

/// What claiming reads of one object.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub labels: &'a BTreeMap<String, String>,
    pub controller_uid: Option<&'a str>,
    pub deleting: bool,
    /// A pod in phase Succeeded or Failed.
    pub finished: bool,
}

impl<'a> Candidate<'a> {
    /// An informer's object.
    pub fn of(obj: &'a Object) -> Candidate<'a> {
        Candidate {
            labels: obj.labels(),
            controller_uid: obj.controller().map(|c| c.uid.as_str()),
            deleting: obj.is_deleting(),
            finished: matches!(obj.field("status.phase"), Some("Succeeded" | "Failed")),
        }
    }
}

/// The objects sorted by their claim (pure; upstream's `ClaimPods` before its writes).
#[derive(Debug, PartialEq, Eq)]
pub struct Sorted<T> {
    pub owned: Vec<T>,
    pub adopt: Vec<T>,
    pub release: Vec<T>,
}

impl<T> Default for Sorted<T> {
    fn default() -> Self {
        Sorted {
            owned: Vec::new(),
            adopt: Vec::new(),
            release: Vec::new(),
        }
    }
}

/// The controlling object, as claiming needs it.
#[derive(Debug, Clone)]
pub struct Owner<'a> {
    /// Its resource type (to re-read it before adopting, and for the controller reference).
    pub resource: &'static ResourceType,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub selector: &'a LabelSelector,
    /// Being deleted, as read with the rest of the pass.
    pub deleting: bool,
    pub rules: Rules,
}

impl Owner<'_> {
    /// The reference the owner puts on what it makes and adopts.
    pub fn controller_ref(&self) -> ControllerRef {
        ControllerRef::to(self.resource, self.name, self.uid)
    }

    /// The claim on one object. Pure.
    pub fn decide(&self, c: &Candidate<'_>) -> Claim {
        self.decide_matching(c, || self.selector.matches(c.labels))
    }

    /// [`Owner::decide`], whether the selector matches asked of `matches` only when needed.
    fn decide_matching(&self, c: &Candidate<'_>, matches: impl FnOnce() -> bool) -> Claim {
        if self.rules.active_only && (c.deleting || c.finished) {
            return Claim::Ignore;
        }
        match c.controller_uid {
            Some(uid) if uid != self.uid => return Claim::Ignore,
            None if self.deleting || c.deleting => return Claim::Ignore,
            _ => {}
        }
        let matches = matches();
        match c.controller_uid {
            Some(uid) if uid != self.uid => Claim::Ignore,
            Some(_) if matches => Claim::Owned,
            Some(_) if self.deleting => Claim::Ignore,
            Some(_) => Claim::Release,
            None if matches && !self.deleting && !c.deleting => Claim::Adopt,
            None => Claim::Ignore,
        }
    }

    /// Sorts `items` by their claim, `candidate` reading each. Pure.
    pub fn sort<T>(
        &self,
        items: impl IntoIterator<Item = T>,
        candidate: impl Fn(&T) -> Candidate<'_>,
    ) -> Sorted<T> {
        // The pods of one template share one interned label set: the selector is matched once
        // per run of the same set.
        let items: Vec<T> = items.into_iter().collect();
        let mut memo = self.selector.memo();
        let claims: Vec<Claim> = items
            .iter()
            .map(|item| {
                let c = candidate(item);
                self.decide_matching(&c, || memo.matches(c.labels))
            })
            .collect();
        let mut out = Sorted::default();
        for (item, claim) in items.into_iter().zip(claims) {
            match claim {
                Claim::Owned => out.owned.push(item),
                Claim::Adopt => out.adopt.push(item),
                Claim::Release => out.release.push(item),
                Claim::Ignore => {}
            }
        }
        out
    }

    /// What the owner may claim from `informer`: what it controls and the orphans of its
    /// namespace its selector matches, in name order (plans must not depend on hash order).
    pub fn candidates(&self, informer: &Informer) -> Vec<Arc<Object>> {
        let mut out = informer.controlled_by(self.uid);
        if !self.selector.is_empty() {
            out.extend(
                informer
                    .by_index(ORPHANS_BY_NAMESPACE, self.namespace)
                    .into_iter()
                    .filter(|o| self.selector.matches(o.labels())),
            );
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        out.dedup_by(|a, b| a.uid() == b.uid());
        out
    }

    /// Claims the candidates of `informer`: releases and adoptions written; what the owner
    /// controls after it (an adopted object as written).
    pub fn claim(
        &self,
        registry: &Registry,
        informer: &Informer,
    ) -> Result<Vec<Arc<Object>>, RegistryError> {
        let rt = informer.resource();
        let sorted = self.sort(self.candidates(informer), |o| Candidate::of(o));
        for obj in &sorted.release {
            self.release(registry, rt, obj.name(), obj.uid())?;
        }
        let mut out = sorted.owned;
        for obj in &sorted.adopt {
            if let Some(v) = self.adopt(registry, rt, obj.name(), obj.uid())? {
                out.push(Arc::new(Object::from_value(&v)));
            }
        }
        // The owned ones are in name order already; only adoptions join out of order.
        if !sorted.adopt.is_empty() {
            out.sort_by(|a, b| a.name().cmp(b.name()));
        }
        Ok(out)
    }

    /// [`Owner::claim`], each object read through its view `V`.
    pub fn claim_views<V: View>(
        &self,
        registry: &Registry,
        informer: &Informer,
    ) -> Result<Vec<Arc<V>>, RegistryError> {
        Ok(self
            .claim(registry, informer)?
            .iter()
            .map(|o| o.view())
            .collect())
    }

    /// Whether the owner is still the object planned for and not being deleted, read from
    /// the registry (upstream's `RecheckDeletionTimestamp`).
    pub fn can_adopt(&self, registry: &Registry) -> Result<bool, RegistryError> {
        registry.is_live_owner(self.resource, self.namespace, self.name, self.uid)
    }

    /// Makes the owner the controller of the orphan `name` (uid `uid`) of type `rt`; the
    /// object as written (its `resourceVersion` for read-your-writes) when it is ours now.
    /// The owner is re-checked live first, and the object on the fresh copy: it may have been
    /// adopted, relabelled or deleted meanwhile.
    pub fn adopt(
        &self,
        registry: &Registry,
        rt: &ResourceType,
        name: &str,
        uid: &str,
    ) -> Result<Option<Value>, RegistryError> {
        if !self.can_adopt(registry)? {
            return Ok(None);
        }
        let ours = self.controller_ref().to_value();
        let r = write::edit(registry, rt, self.namespace, name, uid, |obj| {
            let fresh = Candidate {
                labels: &string_map(obj.pointer("/metadata/labels")),
                controller_uid: controller_uid(obj),
                deleting: obj.pointer("/metadata/deletionTimestamp").is_some(),
                finished: matches!(
                    obj.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                ),
            };
            if self.decide(&fresh) != Claim::Adopt {
                return;
            }
            let refs = &mut obj["metadata"]["ownerReferences"];
            match refs.as_array_mut() {
                Some(list) => {
                    list.retain(|r| r.get("uid").and_then(Value::as_str) != Some(self.uid));
                    list.push(ours.clone());
                }
                None => *refs = json!([ours]),
            }
            if let Some(f) = self.rules.finalizer {
                let fins = &mut obj["metadata"]["finalizers"];
                match fins.as_array_mut() {
                    Some(list) if !list.iter().any(|x| x == f) => list.push(json!(f)),
                    Some(_) => {}
                    None => *fins = json!([f]),
                }
            }
        })?;
        Ok(r.filter(|obj| controller_uid(obj) == Some(self.uid)))
    }

    /// [`Owner::adopt`] for a plan that assumes the adoption (upstream fails the sync): an
    /// owner gone, replaced or being deleted is [`SyncError::OwnerGone`], an object not
    /// adopted (taken, relabelled or deleted meanwhile) a conflict. The object as written.
    pub fn adopt_planned(
        &self,
        registry: &Registry,
        rt: &ResourceType,
        name: &str,
        uid: &str,
    ) -> Result<Value, SyncError> {
        if !self.can_adopt(registry)? {
            let kind = self.resource.kind.to_lowercase();
            let owner = format!("{kind} {}/{}", self.namespace, self.name);
            return Err(SyncError::OwnerGone(owner));
        }
        let adopted = self.adopt(registry, rt, name, uid)?;
        Ok(adopted.ok_or_else(|| RegistryError::conflict(rt, name))?)
    }

    /// Drops the owner's reference (and its finalizer rule's finalizer) from `name`, which
    /// stopped matching its selector; the object as written, unless it is gone.
    pub fn release(
        &self,
        registry: &Registry,
        rt: &ResourceType,
        name: &str,
        uid: &str,
    ) -> Result<Option<Value>, RegistryError> {
        write::edit(registry, rt, self.namespace, name, uid, |obj| {
            if let Some(f) = self.rules.finalizer {
                drop_finalizer(obj, f);
            }
            berth_registry::meta::release_owner(obj, self.uid);
        })
    }
}

/// Takes `finalizer` off `obj` (the list removed when it empties).
pub fn drop_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let empty = match meta.get_mut("finalizers").and_then(Value::as_array_mut) {
        Some(list) => {
            list.retain(|f| f.as_str() != Some(finalizer));
            list.is_empty()
        }
        None => false,
    };
    if empty {
        meta.remove("finalizers");
    }
}

#[cfg(test)]
mod tests;
