//! Serving custom resources in this process: every stored CustomResourceDefinition the
//! informer delivers is read again into the served table ([`berth_shared::custom::install`]),
//! so each API server of a cluster serves a definition as soon as the controller establishes
//! it, without a restart, and stops when it goes.

use std::sync::{Arc, Mutex};

use berth_runtime::informer::{Delta, Informers};
use berth_shared::custom::{self, SchemaCache};
use berth_shared::resource::CUSTOM_RESOURCE_DEFINITIONS;

/// Subscribes to the definitions: the served table follows them from now on.
pub fn serve(informers: &Informers) {
    let definitions = informers.get(CUSTOM_RESOURCE_DEFINITIONS);
    let cache = Arc::new(Mutex::new(SchemaCache::default()));
    let source = definitions.clone();
    definitions.subscribe(Arc::new(move |_: &[Delta]| {
        let values: Vec<serde_json::Value> = source
            .list()
            .iter()
            .filter_map(|o| o.value().ok())
            .collect();
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        custom::install(&values, &mut cache);
        tracing::debug!(
            types = custom::all_served().len(),
            "custom resource types served"
        );
    }));
}
