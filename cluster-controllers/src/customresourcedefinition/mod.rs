//! The CustomResourceDefinition controller ([`plan`]): accepts a definition's names and
//! establishes it (which makes every API server process serve its types), records its storage
//! version, and on deletion deletes its objects before lifting the
//! `customresourcecleanup.apiextensions.k8s.io` finalizer. Keyed by definition name.

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use berth_registry::{DeleteOptions, Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{Context, Controller, Reconciler};
use berth_shared::admission::CLEANUP_FINALIZER;
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{self, CUSTOM_RESOURCE_DEFINITIONS, ResourceType};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use plan::{Action, Observed};

struct Definitions {
    registry: Registry,
    definitions: Arc<Informer>,
}

/// The resource type a definition's objects are stored as, if it is served.
fn storage_type(crd: &Value) -> Option<&'static ResourceType> {
    let def = berth_shared::custom::parse_definition(crd).ok()?;
    resource::by_plural(&def.group, def.storage_version()?, &def.names.plural)
}

impl Definitions {
    fn objects(
        &self,
        crd: &Value,
    ) -> Result<Option<(&'static ResourceType, Vec<Value>)>, RegistryError> {
        let Some(rt) = storage_type(crd) else {
            return Ok(None);
        };
        Ok(Some((rt, self.registry.list_values(rt, None)?)))
    }

    fn delete_objects(
        &self,
        rt: &'static ResourceType,
        objects: &[Value],
    ) -> Result<(), RegistryError> {
        for o in objects {
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let ns = o.pointer("/metadata/namespace").and_then(Value::as_str);
            match self
                .registry
                .delete(rt, ns, name, &DeleteOptions::default())
            {
                Ok(_) | Err(RegistryError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Reconciler for Definitions {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let Some(obj) = self.definitions.get(None, key.name()) else {
            return Ok(Outcome::Done);
        };
        let crd = obj.value()?;
        let all: Vec<Value> = self
            .definitions
            .list()
            .iter()
            .filter(|o| o.name() != key.name())
            .filter_map(|o| o.value().ok())
            .filter(|o| o.pointer("/spec/group") == crd.pointer("/spec/group"))
            .collect();
        let deleting = crd.pointer("/metadata/deletionTimestamp").is_some();
        let objects = if deleting { self.objects(&crd)? } else { None };
        let observed = Observed {
            crd: &crd,
            others: all.iter().collect(),
            remaining: objects.as_ref().map(|(_, o)| o.len()),
            served: berth_shared::custom::serves_definition(key.name()),
        };
        let now = berth_registry::meta::now_rfc3339();
        let opts = WriteOptions::default();
        let mut outcome = Outcome::Done;
        for action in plan::plan(&observed, &now) {
            match action {
                Action::WriteStatus(status) => {
                    self.registry.update_with(
                        CUSTOM_RESOURCE_DEFINITIONS,
                        None,
                        key.name(),
                        Part::Status,
                        &opts,
                        |mut v| {
                            v["status"] = status.clone();
                            Ok::<_, RegistryError>(v)
                        },
                    )?;
                }
                Action::DeleteObjects => {
                    if let Some((rt, objects)) = &objects {
                        self.delete_objects(rt, objects)?;
                    }
                    // Objects with finalizers of their own go later: look again.
                    outcome = Outcome::RequeueAfter(Duration::from_secs(1));
                }
                Action::RemoveFinalizer => {
                    let r = self.registry.update_with(
                        CUSTOM_RESOURCE_DEFINITIONS,
                        None,
                        key.name(),
                        Part::Main,
                        &opts,
                        |mut v| {
                            if let Some(f) = v
                                .pointer_mut("/metadata/finalizers")
                                .and_then(Value::as_array_mut)
                            {
                                f.retain(|x| x != CLEANUP_FINALIZER);
                            }
                            Ok::<_, RegistryError>(v)
                        },
                    );
                    match r {
                        Ok(_) | Err(RegistryError::NotFound { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(outcome)
    }
}

/// Runs the controller until `shutdown`. A change of any definition looks at every definition
/// of its group again (a name one gives up may be another's to take).
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let definitions = ctx.informer(CUSTOM_RESOURCE_DEFINITIONS);
    let reconciler = Arc::new(Definitions {
        registry: ctx.registry.clone(),
        definitions: definitions.clone(),
    });
    let group_of = definitions.clone();
    Controller::new(
        "customresourcedefinition",
        &ctx,
        CUSTOM_RESOURCE_DEFINITIONS,
    )
    .watches(CUSTOM_RESOURCE_DEFINITIONS, move |d| {
        let group = d
            .object
            .value()
            .ok()
            .and_then(|v| v.pointer("/spec/group").cloned());
        group_of
            .list()
            .iter()
            .filter(|o| {
                o.value()
                    .ok()
                    .and_then(|v| v.pointer("/spec/group").cloned())
                    == group
            })
            .map(|o| o.key().clone())
            .collect()
    })
    .run(reconciler, shutdown)
    .await;
}
