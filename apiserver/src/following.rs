//! Process-wide state that follows stored objects: every change the informers deliver to any
//! of some resource types hands the stored objects of each type, as JSON, to an install
//! function (served custom resource types, admission policies, webhook configurations).

use std::sync::Arc;

use berth_runtime::informer::{Delta, Informer, Informers};
use berth_shared::resource::ResourceType;
use serde_json::Value;

/// The stored objects an informer holds, as JSON (one that does not parse is left out).
fn values(informer: &Informer) -> Vec<Value> {
    informer
        .list()
        .iter()
        .filter_map(|o| o.value().ok())
        .collect()
}

/// Subscribes to `types`: `install` gets every stored object of each (in `types`' order) now,
/// if any is stored, and again after every change of any of them.
pub fn follow(
    informers: &Informers,
    types: &[&'static ResourceType],
    install: impl Fn(&[Vec<Value>]) + Send + Sync + 'static,
) {
    let watched: Vec<Arc<Informer>> = types.iter().map(|rt| informers.get(rt)).collect();
    let install: Arc<dyn Fn() + Send + Sync> = {
        let watched = watched.clone();
        Arc::new(move || {
            let all: Vec<Vec<Value>> = watched.iter().map(|i| values(i)).collect();
            install(&all);
        })
    };
    for informer in &watched {
        let install = install.clone();
        informer.subscribe(Arc::new(move |_: &[Delta]| install()));
    }
}
