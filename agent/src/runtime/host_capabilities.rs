//! The capabilities the agent itself holds (its bounding set), which is what a privileged
//! container can be given: containerd's CRI grants a privileged container the capabilities of
//! its own process, not every capability the kernel knows, so hosts with a restricted bounding
//! set (containers, VMs, nested setups lacking e.g. `CAP_SYS_RESOURCE`) still run them.

use std::collections::HashSet;

use oci_spec::runtime::Capability;

/// The agent's bounding set as OCI capabilities; every capability when it cannot be read (the
/// runtime then says what it could not apply).
pub(crate) fn bounding_set() -> HashSet<Capability> {
    match caps::read(None, caps::CapSet::Bounding) {
        Ok(set) => set
            .into_iter()
            .filter_map(|c| serde_json::from_value(serde_json::Value::String(c.to_string())).ok())
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the agent's capability bounding set");
            super::capabilities::all()
        }
    }
}
