//! The garbage collector: keeps an ownership graph (uid → object, owner uid → dependents) fed
//! by the store's event stream, and reconciles owner uids with [`plan::plan`]: cascading
//! deletion (Background, Foreground) and orphaning through ownerReferences and finalizers.

pub mod plan;

use crate::api::error::ApiError;
use crate::registry::{
    DeleteOptions, DeletePreconditions, Part, Propagation, Registry, WriteOptions, key_of_value,
    parse_key,
};
use crate::store::{EventType, StoreEvent};
use berth_shared::reconcile::{self, Outcome, Queue};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
struct OwnerRef {
    uid: String,
    blocks: bool,
}

#[derive(Debug, Clone)]
struct Node {
    key: String,
    owners: Vec<OwnerRef>,
    deleting: bool,
    finalizers: Vec<String>,
}

#[derive(Default)]
struct Graph {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
}

fn node_of(key: &str, obj: &Value) -> Option<(String, Node)> {
    let uid = obj.pointer("/metadata/uid")?.as_str()?.to_string();
    let owners = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| {
                    Some(OwnerRef {
                        uid: r.get("uid")?.as_str()?.to_string(),
                        blocks: r
                            .get("blockOwnerDeletion")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let finalizers = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    Some((
        uid,
        Node {
            key: key.to_string(),
            owners,
            deleting: obj.pointer("/metadata/deletionTimestamp").is_some(),
            finalizers,
        },
    ))
}

impl Graph {
    fn remove(&mut self, uid: &str) -> Option<Node> {
        let node = self.nodes.remove(uid)?;
        for o in &node.owners {
            if let Some(set) = self.dependents.get_mut(&o.uid) {
                set.remove(uid);
                if set.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        Some(node)
    }

    fn insert(&mut self, uid: String, node: Node) {
        self.remove(&uid);
        for o in &node.owners {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(uid.clone());
        }
        self.nodes.insert(uid, node);
    }

    /// Applies an event; returns the uids whose plans may have changed.
    fn apply(&mut self, key: &str, event_type: EventType, obj: &Value) -> Vec<String> {
        let Some((uid, node)) = node_of(key, obj) else {
            return Vec::new();
        };
        let mut touched: Vec<String> = node.owners.iter().map(|o| o.uid.clone()).collect();
        if let Some(old) = self.nodes.get(&uid) {
            touched.extend(old.owners.iter().map(|o| o.uid.clone()));
        }
        match event_type {
            EventType::Deleted => {
                self.remove(&uid);
                if self.dependents.contains_key(&uid) {
                    touched.push(uid);
                }
            }
            _ => {
                let interesting = node.deleting || self.dependents.contains_key(&uid);
                self.insert(uid.clone(), node);
                if interesting {
                    touched.push(uid);
                }
            }
        }
        touched
    }

    fn plan_input(&self, uid: &str) -> (Option<plan::Owner>, Vec<plan::Dependent>) {
        let owner = self.nodes.get(uid).map(|n| plan::Owner {
            deleting: n.deleting,
            finalizers: n.finalizers.clone(),
        });
        let deps = self
            .dependents
            .get(uid)
            .map(|set| {
                set.iter()
                    .filter_map(|d| {
                        let n = self.nodes.get(d)?;
                        let this = n.owners.iter().find(|o| o.uid == uid)?;
                        Some(plan::Dependent {
                            uid: d.clone(),
                            blocks_owner: this.blocks,
                            has_other_live_owner: n
                                .owners
                                .iter()
                                .any(|o| o.uid != uid && self.nodes.contains_key(&o.uid)),
                            deleting: n.deleting,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        (owner, deps)
    }
}

struct Collector {
    registry: Registry,
    graph: Mutex<Graph>,
}

impl Collector {
    fn key_of(&self, uid: &str) -> Option<String> {
        self.graph
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .nodes
            .get(uid)
            .map(|n| n.key.clone())
    }

    fn apply(&self, action: plan::Action) -> Result<(), ApiError> {
        let opts = WriteOptions::default();
        match action {
            plan::Action::Delete { uid, propagation } => {
                let Some(key) = self.key_of(&uid) else {
                    return Ok(());
                };
                let Some((rt, ns, name)) = parse_key(&key) else {
                    return Ok(());
                };
                let opts = DeleteOptions {
                    propagation_policy: Some(match propagation {
                        plan::Propagation::Background => Propagation::Background,
                        plan::Propagation::Foreground => Propagation::Foreground,
                    }),
                    preconditions: Some(DeletePreconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteOptions::default()
                };
                match self.registry.delete(rt, ns.as_deref(), &name, &opts) {
                    Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            plan::Action::RemoveOwnerReference { dependent, owner } => {
                let Some(key) = self.key_of(&dependent) else {
                    return Ok(());
                };
                let Some((rt, ns, name)) = parse_key(&key) else {
                    return Ok(());
                };
                let r = self.registry.update_with(
                    rt,
                    ns.as_deref(),
                    &name,
                    Part::Main,
                    &opts,
                    |mut obj| {
                        if let Some(refs) = obj
                            .pointer_mut("/metadata/ownerReferences")
                            .and_then(Value::as_array_mut)
                        {
                            refs.retain(|r| {
                                r.get("uid").and_then(Value::as_str) != Some(owner.as_str())
                            });
                            if refs.is_empty()
                                && let Some(m) =
                                    obj.get_mut("metadata").and_then(Value::as_object_mut)
                            {
                                m.remove("ownerReferences");
                            }
                        }
                        Ok(obj)
                    },
                );
                match r {
                    Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            plan::Action::RemoveFinalizer { uid, finalizer } => {
                let Some(key) = self.key_of(&uid) else {
                    return Ok(());
                };
                let Some((rt, ns, name)) = parse_key(&key) else {
                    return Ok(());
                };
                let r = self.registry.update_with(
                    rt,
                    ns.as_deref(),
                    &name,
                    Part::Main,
                    &opts,
                    |mut obj| {
                        if let Some(f) = obj
                            .pointer_mut("/metadata/finalizers")
                            .and_then(Value::as_array_mut)
                        {
                            f.retain(|x| x.as_str() != Some(finalizer));
                        }
                        Ok(obj)
                    },
                );
                match r {
                    Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn reconcile(&self, uid: &str) -> Result<Outcome, ApiError> {
        let (owner, deps) = self
            .graph
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .plan_input(uid);
        let actions = plan::plan(uid, owner.as_ref(), &deps);
        let waiting = owner.as_ref().is_some_and(|o| o.deleting) && !deps.is_empty();
        for a in actions {
            tracing::debug!(owner = uid, action = ?a, "garbage collector");
            self.apply(a)?;
        }
        // Dependents still terminating: look again soon (their deletion also requeues us).
        Ok(if waiting {
            Outcome::RequeueAfter(std::time::Duration::from_secs(2))
        } else {
            Outcome::Done
        })
    }
}

/// Starts the garbage collector.
pub fn start(registry: Registry, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let store = registry.store().clone();
        let collector = Arc::new(Collector {
            registry,
            graph: Mutex::new(Graph::default()),
        });
        let queue: Queue<String> = Queue::new();
        let c = collector.clone();
        let runner = tokio::spawn(reconcile::run(
            queue.clone(),
            4,
            shutdown.clone(),
            "garbage-collector",
            move |uid: String| {
                let c = c.clone();
                async move {
                    tokio::task::spawn_blocking(move || c.reconcile(&uid))
                        .await
                        .map_err(|e| ApiError::Internal(e.to_string()))?
                }
            },
        ));
        // List, then watch; a watcher that falls behind starts over from a fresh list.
        while !shutdown.is_cancelled() {
            let (rev, items, _) = store.list("/", None, None, |_| true);
            let mut graph = Graph::default();
            for item in &items {
                if let Ok(v) = item.value()
                    && let Some(key) = key_of_value(&v)
                    && let Some((uid, node)) = node_of(&key, &v)
                {
                    graph.insert(uid, node);
                }
            }
            for uid in graph.dependents.keys() {
                queue.add(uid.clone());
            }
            for (uid, n) in &graph.nodes {
                if n.deleting {
                    queue.add(uid.clone());
                }
            }
            *collector.graph.lock().unwrap_or_else(|e| e.into_inner()) = graph;
            let watch = match store.watch(rev) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "garbage collector relisting");
                    continue;
                }
            };
            let feed = |ev: &StoreEvent| {
                let Ok(v) = ev.object.value() else { return };
                let touched = collector
                    .graph
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .apply(&ev.key, ev.event_type, &v);
                for uid in touched {
                    queue.add(uid);
                }
            };
            for ev in &watch.backlog {
                feed(ev);
            }
            let mut live = watch.live;
            loop {
                tokio::select! {
                    r = live.recv() => match r {
                        Ok(ev) => feed(&ev),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "garbage collector lagged; relisting");
                            break;
                        }
                        Err(_) => return,
                    },
                    _ = shutdown.cancelled() => break,
                }
            }
        }
        let _ = runner.await;
    })
}
