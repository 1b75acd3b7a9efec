//! The garbage collector: keeps an ownership graph ([`graph::Graph`]) fed by the informers of
//! every resource type, and reconciles owner uids with [`plan::plan`]: cascading deletion
//! (Background, Foreground) and orphaning through ownerReferences and finalizers.

pub mod graph;
pub mod plan;

use berth_registry::{
    DeleteOptions, DeletePreconditions, Part, Propagation, Registry, RegistryError, WriteOptions,
};
use berth_runtime::informer::Delta;
use berth_runtime::{Context, Controller, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{self, EVENTS, ResourceType};
use graph::Graph;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

struct Collector {
    registry: Registry,
    graph: Arc<Mutex<Graph>>,
}

impl Collector {
    /// The type, namespace and name of the object with `uid`.
    fn address_of(&self, uid: &str) -> Option<(&'static ResourceType, Option<String>, String)> {
        let graph = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        let node = graph.node(uid)?;
        Some((
            node.rt,
            node.object.namespace().map(str::to_string),
            node.object.name().to_string(),
        ))
    }

    fn apply(&self, action: plan::Action) -> Result<(), RegistryError> {
        match action {
            plan::Action::Delete { uid, propagation } => {
                let Some((rt, ns, name)) = self.address_of(&uid) else {
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
                    Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            plan::Action::RemoveOwnerReference { dependent, owner } => {
                self.edit_metadata(&dependent, |obj| {
                    if let Some(refs) = obj
                        .pointer_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&owner));
                        if refs.is_empty()
                            && let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut)
                        {
                            m.remove("ownerReferences");
                        }
                    }
                })
            }
            plan::Action::RemoveFinalizer { uid, finalizer } => self.edit_metadata(&uid, |obj| {
                if let Some(f) = obj
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    f.retain(|x| x.as_str() != Some(finalizer));
                }
            }),
        }
    }

    /// Changes the metadata of the object with `uid` (one that is gone needs nothing).
    fn edit_metadata(&self, uid: &str, edit: impl Fn(&mut Value)) -> Result<(), RegistryError> {
        let Some((rt, ns, name)) = self.address_of(uid) else {
            return Ok(());
        };
        let r = self.registry.update_with(
            rt,
            ns.as_deref(),
            &name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                edit(&mut obj);
                Ok::<_, RegistryError>(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Collector {
    /// Whether an owner missing from the graph exists after all: read from the store as its
    /// dependents name it, as upstream's collector checks before treating dependents as
    /// dangling.
    fn owner_exists(&self, uid: &str) -> Result<bool, RegistryError> {
        let found = self
            .graph
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .owner_ref(uid);
        let Some((owner, dependent_ns)) = found else {
            return Ok(false);
        };
        let Some(rt) = berth_shared::resource::by_kind(&owner.api_version, &owner.kind) else {
            return Ok(false);
        };
        let ns = if rt.namespaced {
            dependent_ns.as_deref()
        } else {
            None
        };
        match self.registry.get(rt, ns, &owner.name) {
            Ok(o) => Ok(o.index.uid == uid),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Reconciler for Collector {
    type Key = String;
    type Error = RegistryError;

    fn reconcile(&self, uid: &String) -> Result<Outcome, RegistryError> {
        let (owner, deps) = self
            .graph
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .plan_input(uid);
        if owner.is_none() && !deps.is_empty() && self.owner_exists(uid)? {
            // Its informer has not delivered it yet (each type has its own): its arrival
            // brings this owner back, present.
            return Ok(Outcome::Done);
        }
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

/// Runs the garbage collector until `shutdown`: the owners each change of any type concerns
/// are reconciled. Custom resource types join as their definitions are served.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let graph = Arc::new(Mutex::new(Graph::default()));
    let collector = Arc::new(Collector {
        registry: ctx.registry.clone(),
        graph: graph.clone(),
    });
    let mut controller = Controller::keyed("garbage-collector", &ctx).workers(4);
    // Events are left out, as upstream's collector leaves them out by default (its
    // `DefaultIgnoredResources`): they are never owners, and there are many.
    let mut watched = std::collections::HashSet::new();
    for rt in resource::stored().filter(|rt| !std::ptr::eq(*rt, EVENTS)) {
        watched.insert(rt.group_resource());
        let graph = graph.clone();
        controller = controller.watches(rt, move |d: &Delta| {
            graph
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .apply(rt, d.kind, &d.object)
        });
    }
    watch_custom_types(&ctx, &controller, graph, watched);
    controller.run(collector, shutdown).await;
}

/// Follows the custom resource types as their definitions are served: each new one's changes
/// feed the graph from then on (its informer first reports what it holds).
fn watch_custom_types(
    ctx: &Context,
    controller: &Controller<String>,
    graph: Arc<Mutex<Graph>>,
    watched: std::collections::HashSet<String>,
) {
    let queue = controller.queue();
    let watched = Mutex::new(watched);
    let informers = ctx.clone();
    ctx.informer(resource::CUSTOM_RESOURCE_DEFINITIONS)
        .subscribe(Arc::new(move |_: &[Delta]| {
            let mut watched = watched.lock().unwrap_or_else(|e| e.into_inner());
            for rt in resource::stored().filter(|rt| rt.custom) {
                if !watched.insert(rt.group_resource()) {
                    continue;
                }
                let graph = graph.clone();
                let queue = queue.clone();
                informers
                    .informer(rt)
                    .subscribe(Arc::new(move |deltas: &[Delta]| {
                        let mut g = graph.lock().unwrap_or_else(|e| e.into_inner());
                        for d in deltas {
                            for k in g.apply(rt, d.kind, &d.object) {
                                queue.add(k);
                            }
                        }
                    }));
            }
        }));
}
