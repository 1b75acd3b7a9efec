//! Which sets a change concerns, and the views routing needs. A set's own change enqueues it;
//! a pod change enqueues its controlling set before and after the change (a released or
//! re-owned pod concerns both) or, for a live orphan, every set in its namespace whose selector
//! matches it (upstream's `addPod`/`updatePod`/`deletePod`). Reads the informers' caches only.

use super::view::{Kind, Set};
use crate::informer::{Delta, DeltaType, Informer, Object, View};
use std::fmt;
use std::sync::Arc;

/// The queue key: one ReplicaSet or ReplicationController.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl SetKey {
    pub fn of(kind: Kind, obj: &Object) -> SetKey {
        SetKey {
            kind,
            namespace: obj.namespace().unwrap_or_default().to_string(),
            name: obj.name().to_string(),
        }
    }
}

impl fmt::Display for SetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

/// A set parsed once per version (`None`: unreadable, it matches nothing).
pub struct ParsedSet(pub Option<Set>);

impl View for ParsedSet {
    fn derive(obj: &Object) -> Self {
        let parsed = obj.value().ok().and_then(|v| {
            let api_version = v.get("apiVersion")?.as_str()?;
            let kind = Kind::of_owner(api_version, v.get("kind")?.as_str()?)?;
            Set::from_value(kind, &v).ok()
        });
        ParsedSet(parsed)
    }
}

/// The informers of the two set kinds.
pub struct Sets {
    pub replica_sets: Arc<Informer>,
    pub controllers: Arc<Informer>,
}

impl Sets {
    pub fn informer(&self, kind: Kind) -> &Arc<Informer> {
        match kind {
            Kind::ReplicaSet => &self.replica_sets,
            Kind::ReplicationController => &self.controllers,
        }
    }

    /// The parsed sets of `namespace`, both kinds.
    pub fn in_namespace(&self, namespace: &str) -> Vec<(SetKey, Arc<ParsedSet>)> {
        [Kind::ReplicaSet, Kind::ReplicationController]
            .into_iter()
            .flat_map(|kind| {
                self.informer(kind)
                    .in_namespace(namespace)
                    .into_iter()
                    .map(move |o| (SetKey::of(kind, &o), o.view::<ParsedSet>()))
            })
            .collect()
    }

    /// Every set, both kinds (for the resync).
    pub fn all(&self) -> Vec<SetKey> {
        [Kind::ReplicaSet, Kind::ReplicationController]
            .into_iter()
            .flat_map(|kind| {
                self.informer(kind)
                    .list()
                    .into_iter()
                    .map(move |o| SetKey::of(kind, &o))
            })
            .collect()
    }
}

/// The set controlling `pod`, when it is one of ours.
fn controller_key(pod: &Object) -> Option<SetKey> {
    let c = pod.controller()?;
    Some(SetKey {
        kind: Kind::of_owner(&c.api_version, &c.kind)?,
        namespace: pod.namespace().unwrap_or_default().to_string(),
        name: c.name.clone(),
    })
}

/// The sets a pod change concerns.
pub fn pod_change(sets: &Sets, d: &Delta) -> Vec<SetKey> {
    let mut keys = Vec::new();
    if let Some(old) = d.old.as_ref().and_then(|o| controller_key(o)) {
        keys.push(old);
    }
    match controller_key(&d.object) {
        Some(k) if !keys.contains(&k) => keys.push(k),
        Some(_) => {}
        None if d.object.controller().is_none()
            && d.kind != DeltaType::Deleted
            && !d.object.is_deleting() =>
        {
            let labels = d.object.labels();
            for (key, set) in sets.in_namespace(d.object.namespace().unwrap_or_default()) {
                if set
                    .0
                    .as_ref()
                    .is_some_and(|s| !s.selector.is_empty() && s.selector.matches(labels))
                    && !keys.contains(&key)
                {
                    keys.push(key);
                }
            }
        }
        None => {}
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ControlPlane;
    use berth_shared::resource::{REPLICA_SETS, REPLICATION_CONTROLLERS};
    use serde_json::{Value, json};

    fn rs(name: &str, tier: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"selector": {"matchLabels": {"tier": tier}},
                "template": {"metadata": {"labels": {"tier": tier}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    }

    fn pod(name: &str, tier: &str, owner: Option<&str>) -> Arc<Object> {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"tier": tier}}});
        if let Some(o) = owner {
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                "kind": "ReplicaSet", "name": o, "uid": format!("uid-{o}"), "controller": true}]);
        }
        Arc::new(Object::from_value(&p))
    }

    fn key(name: &str) -> SetKey {
        SetKey {
            kind: Kind::ReplicaSet,
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn change(kind: DeltaType, object: Arc<Object>, old: Option<Arc<Object>>) -> Delta {
        Delta { kind, object, old }
    }

    async fn sets(objects: &[Value]) -> (ControlPlane, Sets) {
        let cp = ControlPlane::start();
        for o in objects {
            cp.registry()
                .create(
                    REPLICA_SETS,
                    Some("default"),
                    o.clone(),
                    &Default::default(),
                )
                .unwrap();
        }
        let sets = Sets {
            replica_sets: cp.ctx.informer(REPLICA_SETS),
            controllers: cp.ctx.informer(REPLICATION_CONTROLLERS),
        };
        cp.caught_up().await;
        (cp, sets)
    }

    #[tokio::test]
    async fn an_owned_pod_concerns_its_controller_only() {
        let (_cp, s) = sets(&[rs("a", "web"), rs("b", "web")]).await;
        let d = change(DeltaType::Added, pod("p", "web", Some("a")), None);
        assert_eq!(pod_change(&s, &d), [key("a")]);
    }

    #[tokio::test]
    async fn an_orphan_concerns_every_set_whose_selector_matches() {
        let (_cp, s) = sets(&[rs("a", "web"), rs("b", "web"), rs("c", "db")]).await;
        let mut got = pod_change(&s, &change(DeltaType::Added, pod("p", "web", None), None));
        got.sort();
        assert_eq!(got, [key("a"), key("b")]);
    }

    #[tokio::test]
    async fn losing_the_controller_concerns_the_previous_one() {
        let (_cp, s) = sets(&[rs("a", "web")]).await;
        let d = change(
            DeltaType::Modified,
            pod("p", "debug", None),
            Some(pod("p", "web", Some("a"))),
        );
        assert_eq!(pod_change(&s, &d), [key("a")]);
    }

    #[tokio::test]
    async fn a_deleted_pod_concerns_its_controller_and_a_deleted_orphan_nobody() {
        let (_cp, s) = sets(&[rs("a", "web")]).await;
        let owned = pod("p", "web", Some("a"));
        let d = change(DeltaType::Deleted, owned.clone(), Some(owned));
        assert_eq!(pod_change(&s, &d), [key("a")]);
        let orphan = pod("q", "web", None);
        assert!(
            pod_change(
                &s,
                &change(DeltaType::Deleted, orphan.clone(), Some(orphan))
            )
            .is_empty()
        );
    }
}
