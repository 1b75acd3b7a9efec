//! API aggregation (`apiregistration.k8s.io/v1` APIServices), as kube-aggregator: each stored
//! APIService names a group-version and who serves it — this process (`Local`, no `service`)
//! or a Service in the cluster. Requests under a remotely served group-version are proxied to
//! it ([`crate::api`]'s aggregated handler, with the caller's identity in the front proxy's
//! headers); its resources join discovery from what the availability check last fetched
//! ([`availability`]); a user's APIService for a group-version Berth serves itself
//! (`v1beta1.metrics.k8s.io`) replaces the built-in one.
//!
//! Every API server process follows the APIServices through its informer, as every
//! kube-apiserver runs its own aggregator.

pub mod availability;
pub mod backend;
pub mod bootstrap;
pub mod front_proxy;
pub mod registration;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use berth_runtime::informer::Informers;
use berth_shared::resource::API_SERVICES;
use serde_json::Value;

pub use registration::{Registration, ServiceRef};

/// The APIServices this process routes by, and the discovery documents of the remote ones.
#[derive(Default)]
pub struct Aggregator {
    registrations: RwLock<Arc<Vec<Registration>>>,
    /// Each remote group-version's `APIResourceList`, as its server last answered it.
    discovered: RwLock<HashMap<(String, String), Value>>,
    /// Notified at every change of the registrations (the availability check runs again).
    pub(crate) changed: tokio::sync::Notify,
}

impl Aggregator {
    /// Follows the stored APIServices from now on.
    pub fn follow(self: &Arc<Self>, informers: &Informers) {
        let me = self.clone();
        crate::following::follow(informers, &[API_SERVICES], move |stored| {
            let regs: Vec<Registration> =
                stored[0].iter().filter_map(Registration::parse).collect();
            me.install(regs);
        });
    }

    /// Replaces the registrations (and forgets discovery of group-versions no longer remote).
    pub fn install(&self, regs: Vec<Registration>) {
        {
            let mut discovered = self.discovered.write().unwrap_or_else(|e| e.into_inner());
            discovered.retain(|(g, v), _| {
                regs.iter()
                    .any(|r| r.service.is_some() && &r.group == g && &r.version == v)
            });
        }
        *self
            .registrations
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(regs);
        self.changed.notify_one();
    }

    pub fn registrations(&self) -> Arc<Vec<Registration>> {
        self.registrations
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The registration serving `group`/`version` from a Service, if one does.
    pub fn remote(&self, group: &str, version: &str) -> Option<Registration> {
        self.registrations()
            .iter()
            .find(|r| r.service.is_some() && r.group == group && r.version == version)
            .cloned()
    }

    /// Whether any remote registration serves `group` (a group only a Service serves has its
    /// `/apis/<group>` document written here).
    pub fn remote_group(&self, group: &str) -> Vec<Registration> {
        let mut regs: Vec<Registration> = self
            .registrations()
            .iter()
            .filter(|r| r.service.is_some() && r.group == group)
            .cloned()
            .collect();
        registration::sort_versions(&mut regs);
        regs
    }

    /// Remembers what `group`/`version`'s server answered for discovery.
    pub fn set_discovered(&self, group: &str, version: &str, list: Option<Value>) {
        let mut discovered = self.discovered.write().unwrap_or_else(|e| e.into_inner());
        let key = (group.to_string(), version.to_string());
        match list {
            Some(l) => {
                discovered.insert(key, l);
            }
            None => {
                discovered.remove(&key);
            }
        }
    }

    pub fn discovered(&self, group: &str, version: &str) -> Option<Value> {
        self.discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(group.to_string(), version.to_string()))
            .cloned()
    }
}
