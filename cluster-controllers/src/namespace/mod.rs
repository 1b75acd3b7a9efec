//! The namespace controller: empties terminating namespaces and then releases them, so the
//! registry removes them.

pub mod plan;

use berth_registry::{DeleteOptions, Part, Propagation, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{Context, Controller, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{self, NAMESPACES, ResourceType};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What is left in a namespace, and where each piece lives (by the planner's key).
type Content = (
    Vec<plan::Content>,
    HashMap<String, (&'static ResourceType, String)>,
);

struct Namespaces {
    registry: Registry,
    namespaces: Arc<Informer>,
}

impl Namespaces {
    /// Everything left in the namespace, read from the store itself rather than a cache: the
    /// namespace is released only when this is empty.
    fn observe_content(&self, name: &str) -> Result<Content, RegistryError> {
        let mut content = Vec::new();
        let mut refs = HashMap::new();
        for rt in resource::stored().filter(|r| r.namespaced) {
            for v in self.registry.list_values(rt, Some(name))? {
                let obj = v
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let key = format!("{}/{obj}", rt.group_resource());
                content.push(plan::Content {
                    key: key.clone(),
                    deleting: v.pointer("/metadata/deletionTimestamp").is_some(),
                });
                refs.insert(key, (rt, obj));
            }
        }
        Ok((content, refs))
    }
}

impl Reconciler for Namespaces {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        self.namespaces.reconcile_cached(key, |ns| {
            let name = key.name();
            let ns = ns.value()?;
            let deleting = ns.pointer("/metadata/deletionTimestamp").is_some();
            let fins: Vec<String> = ns
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let (content, refs) = if deleting {
                self.observe_content(name)?
            } else {
                Default::default()
            };
            let mut outcome = Outcome::Done;
            for action in plan::plan(deleting, &fins, &content) {
                match action {
                    plan::Action::Delete { key } => {
                        let Some((rt, obj)) = refs.get(&key) else {
                            continue;
                        };
                        // As upstream's namespace deleter: dependents go too, whatever the kind's
                        // default (a Job's is to orphan its pods).
                        let opts = DeleteOptions {
                            propagation_policy: Some(Propagation::Background),
                            ..DeleteOptions::default()
                        };
                        match self.registry.delete(rt, Some(name), obj, &opts) {
                            Ok(_) | Err(RegistryError::NotFound { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    plan::Action::RemoveFinalizer => {
                        self.registry.update_with(
                            NAMESPACES,
                            None,
                            name,
                            Part::Main,
                            &WriteOptions::default(),
                            |mut obj| {
                                if let Some(f) = obj
                                    .pointer_mut("/spec/finalizers")
                                    .and_then(Value::as_array_mut)
                                {
                                    f.retain(|x| x.as_str() != Some(plan::FINALIZER));
                                }
                                Ok::<_, RegistryError>(obj)
                            },
                        )?;
                    }
                    plan::Action::Wait => {
                        outcome = Outcome::RequeueAfter(Duration::from_millis(500))
                    }
                }
            }
            Ok(outcome)
        })
    }
}

/// Runs the namespace controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let reconciler = Arc::new(Namespaces {
        registry: ctx.registry.clone(),
        namespaces: ctx.informer(NAMESPACES),
    });
    Controller::new("namespace", &ctx, NAMESPACES)
        .workers(2)
        .run(reconciler, shutdown)
        .await;
}
