//! Admission webhooks in force in this process: every change the informers deliver to the
//! Validating- or MutatingWebhookConfigurations installs the stored set again into the
//! registry's compiled cache ([`berth_registry::webhook::Webhooks`]; unchanged configurations
//! are not compiled again), and the registry's calls go through this process's HTTPS client
//! ([`client::HttpsClient`]), so a configuration or its removal applies to the next write.

pub mod client;

use std::sync::Arc;

use berth_registry::Registry;
use berth_runtime::informer::{Delta, Informer, Informers};
use berth_shared::resource::{MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS};

fn values(informer: &Informer) -> Vec<serde_json::Value> {
    informer
        .list()
        .iter()
        .filter_map(|o| o.value().ok())
        .collect()
}

/// Subscribes to the webhook configurations: `registry` calls them from now on. Must be
/// called inside the tokio runtime the calls are to run on.
pub fn enforce(informers: &Informers, registry: &Registry) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => registry
            .admission_webhooks()
            .set_transport(Arc::new(client::HttpsClient::new(handle))),
        Err(e) => tracing::error!(error = %e, "admission webhooks have no runtime to call them on"),
    }
    let validating = informers.get(VALIDATING_WEBHOOK_CONFIGURATIONS);
    let mutating = informers.get(MUTATING_WEBHOOK_CONFIGURATIONS);
    let install: Arc<dyn Fn() + Send + Sync> = {
        let (validating, mutating, registry) =
            (validating.clone(), mutating.clone(), registry.clone());
        Arc::new(move || {
            let (v, m) = (values(&validating), values(&mutating));
            registry.admission_webhooks().install(&v, &m);
            tracing::debug!(
                validating = v.len(),
                mutating = m.len(),
                "admission webhook configurations installed"
            );
        })
    };
    for informer in [&validating, &mutating] {
        let install = install.clone();
        informer.subscribe(Arc::new(move |_: &[Delta]| install()));
    }
}
