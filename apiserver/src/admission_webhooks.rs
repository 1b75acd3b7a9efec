//! Admission webhooks in force in this process: every change the informers deliver to the
//! Validating- or MutatingWebhookConfigurations installs the stored set again into the
//! registry's compiled cache ([`berth_registry::webhook::Webhooks`]; unchanged configurations
//! are not compiled again), and the registry's calls go through this process's HTTPS client
//! ([`client::HttpsClient`]), so a configuration or its removal applies to the next write.

pub mod client;

use std::sync::Arc;

use berth_registry::Registry;
use berth_runtime::informer::Informers;
use berth_shared::resource::{MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS};

/// Subscribes to the webhook configurations: `registry` calls them from now on. Must be
/// called inside the tokio runtime the calls are to run on.
pub fn enforce(informers: &Informers, registry: &Registry) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => registry
            .admission_webhooks()
            .set_transport(Arc::new(client::HttpsClient::new(handle))),
        Err(e) => tracing::error!(error = %e, "admission webhooks have no runtime to call them on"),
    }
    let registry = registry.clone();
    let types = [
        VALIDATING_WEBHOOK_CONFIGURATIONS,
        MUTATING_WEBHOOK_CONFIGURATIONS,
    ];
    crate::following::follow(informers, &types, move |stored| {
        let (v, m) = (&stored[0], &stored[1]);
        registry.admission_webhooks().install(v, m);
        tracing::debug!(
            validating = v.len(),
            mutating = m.len(),
            "admission webhook configurations installed"
        );
    });
}
