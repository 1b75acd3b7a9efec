//! Cluster IPs and node ports on Service writes: each allocation looks at the Services stored
//! and holds a lock until the Service it allocated for is stored, so two writes never take the
//! same address. On a store shared by several controllers the lock is the store's
//! ([`StoreLock`]), taken before the cache is brought up to date and scanned. Nothing is kept besides the Services themselves: deleting one frees what it
//! held, and a restart needs no repair.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use berth_store::StoreLock;

use berth_shared::admission::AdmissionError;
use berth_shared::admission::service_allocation::{self, InUse, ServiceRanges};
use berth_shared::resource;
use rand::Rng;
use serde_json::Value;

use super::{Registry, RegistryError};

/// The ranges Services are given addresses and node ports from.
#[derive(Debug)]
pub struct ServiceIps {
    ranges: ServiceRanges,
    lock: Mutex<()>,
}

/// How long a controller that died holding the shared allocation lock blocks the others.
const SHARED_LOCK_TTL: Duration = Duration::from_secs(10);

/// Held while an allocated Service is written.
pub struct Allocation<'a> {
    _shared: Option<StoreLock>,
    _held: MutexGuard<'a, ()>,
}

/// Why an allocation failed.
#[derive(Debug)]
pub enum AllocationError {
    Invalid(AdmissionError),
    Registry(RegistryError),
}

impl ServiceIps {
    pub fn new(ranges: ServiceRanges) -> ServiceIps {
        ServiceIps {
            ranges,
            lock: Mutex::new(()),
        }
    }

    pub fn ranges(&self) -> &ServiceRanges {
        &self.ranges
    }

    /// Fills the admitted Service `svc` in with its cluster IP and node ports; `updating` is
    /// the uid of the stored Service an update replaces (what it holds stays its own). Keep
    /// the returned guard until the Service is stored.
    pub fn allocate<'a>(
        &'a self,
        registry: &Registry,
        svc: &mut Value,
        updating: Option<&str>,
    ) -> Result<Allocation<'a>, AllocationError> {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let store = registry.store();
        let shared = if store.is_shared() {
            let held = store
                .lock("service-allocation", SHARED_LOCK_TTL, SHARED_LOCK_TTL * 2)
                .map_err(|e| AllocationError::Registry(e.into()))?;
            store
                .sync_blocking()
                .map_err(|e| AllocationError::Registry(e.into()))?;
            Some(held)
        } else {
            None
        };
        let services = registry
            .list_values(resource::SERVICES, None)
            .map_err(AllocationError::Registry)?;
        let in_use = InUse::of(&services, updating);
        service_allocation::allocate(svc, &self.ranges, &in_use, rand::rng().random())
            .map_err(AllocationError::Invalid)?;
        Ok(Allocation {
            _shared: shared,
            _held: guard,
        })
    }
}

impl Default for ServiceIps {
    fn default() -> Self {
        ServiceIps::new(ServiceRanges::default())
    }
}
