//! Serving custom resources in this process: every stored CustomResourceDefinition the
//! informer delivers is read again into the served table ([`berth_shared::custom::install`]),
//! so each API server of a cluster serves a definition as soon as the controller establishes
//! it, without a restart, and stops when it goes.

use std::sync::Mutex;

use berth_runtime::informer::Informers;
use berth_shared::custom::{self, SchemaCache};
use berth_shared::resource::CUSTOM_RESOURCE_DEFINITIONS;

/// Subscribes to the definitions: the served table follows them from now on.
pub fn serve(informers: &Informers) {
    let cache = Mutex::new(SchemaCache::default());
    crate::following::follow(informers, &[CUSTOM_RESOURCE_DEFINITIONS], move |stored| {
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        custom::install(&stored[0], &mut cache);
        tracing::debug!(
            types = custom::all_served().len(),
            "custom resource types served"
        );
    });
}
