//! The namespace controller: empties terminating namespaces and then releases them, so the
//! registry removes them.

pub mod plan;

use crate::api::error::ApiError;
use crate::registry::{DeleteOptions, Part, Registry, WriteOptions, parse_key, prefix};
use berth_shared::reconcile::{self, Outcome, Queue};
use berth_shared::resource::{self, RESOURCES};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn reconcile_one(registry: &Registry, name: &str) -> Result<Outcome, ApiError> {
    let Some(ns_rt) = resource::by_plural("", "v1", "namespaces") else {
        return Ok(Outcome::Done);
    };
    let Ok(ns) = registry.get(ns_rt, None, name) else {
        return Ok(Outcome::Done);
    };
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
    let mut content = Vec::new();
    if deleting {
        for rt in RESOURCES.iter().filter(|r| r.namespaced) {
            let (_, items, _) = registry
                .store()
                .list(&prefix(rt, Some(name)), None, None, |_| true);
            for item in items {
                let v = item.value()?;
                if let Some(key) = crate::registry::key_of_value(&v) {
                    content.push(plan::Content {
                        key,
                        deleting: v.pointer("/metadata/deletionTimestamp").is_some(),
                    });
                }
            }
        }
    }
    let mut outcome = Outcome::Done;
    for action in plan::plan(deleting, &fins, &content) {
        match action {
            plan::Action::Delete { key } => {
                let Some((rt, ns, obj)) = parse_key(&key) else {
                    continue;
                };
                match registry.delete(rt, ns.as_deref(), &obj, &DeleteOptions::default()) {
                    Ok(_) | Err(ApiError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            plan::Action::RemoveFinalizer => {
                registry.update_with(
                    ns_rt,
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
                        Ok(obj)
                    },
                )?;
            }
            plan::Action::Wait => outcome = Outcome::RequeueAfter(Duration::from_millis(500)),
        }
    }
    Ok(outcome)
}

/// Starts the namespace controller.
pub fn start(registry: Registry, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let store = registry.store().clone();
        let queue: Queue<String> = Queue::new();
        let registry = Arc::new(registry);
        let r = registry.clone();
        let runner = tokio::spawn(reconcile::run(
            queue.clone(),
            2,
            shutdown.clone(),
            "namespace",
            move |name: String| {
                let r = r.clone();
                async move {
                    tokio::task::spawn_blocking(move || reconcile_one(&r, &name))
                        .await
                        .map_err(|e| ApiError::Internal(e.to_string()))?
                }
            },
        ));
        super::follow::names(&store, "/core/namespaces/", &shutdown, |name| {
            queue.add(name)
        })
        .await;
        let _ = runner.await;
    })
}
