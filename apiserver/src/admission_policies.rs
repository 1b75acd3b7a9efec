//! ValidatingAdmissionPolicies in force in this process: every change the informers deliver
//! to the policies or their bindings installs the stored set again into the registry's
//! compiled cache ([`berth_registry::admission_policy::Policies`]; unchanged objects are not
//! compiled again), so a policy, a binding or its removal applies to the next write.

use berth_registry::Registry;
use berth_runtime::informer::Informers;
use berth_shared::resource::{VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS};

/// Subscribes to the policies and bindings: `registry` enforces them from now on.
pub fn enforce(informers: &Informers, registry: &Registry) {
    let registry = registry.clone();
    let types = [
        VALIDATING_ADMISSION_POLICIES,
        VALIDATING_ADMISSION_POLICY_BINDINGS,
    ];
    crate::following::follow(informers, &types, move |stored| {
        let (p, b) = (&stored[0], &stored[1]);
        registry.admission_policies().install(p, b);
        tracing::debug!(
            policies = p.len(),
            bindings = b.len(),
            "validating admission policies installed"
        );
    });
}
