//! ValidatingAdmissionPolicies in force in this process: every change the informers deliver
//! to the policies or their bindings installs the stored set again into the registry's
//! compiled cache ([`berth_registry::admission_policy::Policies`]; unchanged objects are not
//! compiled again), so a policy, a binding or its removal applies to the next write.

use std::sync::Arc;

use berth_registry::Registry;
use berth_runtime::informer::{Delta, Informer, Informers};
use berth_shared::resource::{VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS};

fn values(informer: &Informer) -> Vec<serde_json::Value> {
    informer
        .list()
        .iter()
        .filter_map(|o| o.value().ok())
        .collect()
}

/// Subscribes to the policies and bindings: `registry` enforces them from now on.
pub fn enforce(informers: &Informers, registry: &Registry) {
    let policies = informers.get(VALIDATING_ADMISSION_POLICIES);
    let bindings = informers.get(VALIDATING_ADMISSION_POLICY_BINDINGS);
    let install: Arc<dyn Fn() + Send + Sync> = {
        let (policies, bindings, registry) = (policies.clone(), bindings.clone(), registry.clone());
        Arc::new(move || {
            let (p, b) = (values(&policies), values(&bindings));
            registry.admission_policies().install(&p, &b);
            tracing::debug!(
                policies = p.len(),
                bindings = b.len(),
                "validating admission policies installed"
            );
        })
    };
    for informer in [&policies, &bindings] {
        let install = install.clone();
        informer.subscribe(Arc::new(move |_: &[Delta]| install()));
    }
}
