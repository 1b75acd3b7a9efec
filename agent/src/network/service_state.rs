//! Every Service and EndpointSlice in the cluster, listed and then watched, published as one
//! snapshot ([`ServiceState`]) to the service proxy and the cluster DNS after each burst of
//! changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use berth_api::client::Client;
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::watch_cache::{Listed, Relister, WatchCache};

/// Changes arriving this close together are published together.
const BATCH: Duration = Duration::from_millis(50);

/// The cluster's Services and EndpointSlices, keyed `namespace/name`.
#[derive(Debug, Clone, Default)]
pub struct ServiceState {
    pub services: BTreeMap<String, Service>,
    pub slices: BTreeMap<String, EndpointSlice>,
    /// Both have been listed at least once (before that, the maps are empty, not "no
    /// Services").
    pub synced: bool,
}

/// A Service's namespace, name and spec, as the proxy and the DNS read it; `None` for one
/// that lacks any of them (neither serves it).
pub fn named_spec(svc: &Service) -> Option<(&str, &str, &ServiceSpec)> {
    let meta = &svc.metadata;
    Some((
        meta.namespace.as_deref()?,
        meta.name.as_deref()?,
        svc.spec.as_ref()?,
    ))
}

/// A channel for the state, starting empty and unsynced.
pub fn channel() -> (
    watch::Sender<Arc<ServiceState>>,
    watch::Receiver<Arc<ServiceState>>,
) {
    watch::channel(Arc::new(ServiceState::default()))
}

/// Lists, watches and publishes until `shutdown`; relists a kind whose watch ends or fails.
pub async fn run(
    client: Client,
    tx: watch::Sender<Arc<ServiceState>>,
    shutdown: CancellationToken,
) {
    let mut services = WatchCache::<Service>::new("", "v1", "services");
    let mut slices = WatchCache::<EndpointSlice>::new("discovery.k8s.io", "v1", "endpointslices");
    let mut relister = Relister::new("services and endpoint slices");
    loop {
        match relister
            .relist(&client, &mut [&mut services, &mut slices], &shutdown)
            .await
        {
            Listed::Ready => {}
            Listed::Retry => continue,
            Listed::Shutdown => return,
        }
        tx.send_replace(Arc::new(ServiceState {
            services: services.objects.clone(),
            slices: slices.objects.clone(),
            synced: true,
        }));
        // Wait for a change, then gather what follows it closely.
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = services.next() => {}
            _ = slices.next() => {}
        }
        let batch_end = tokio::time::Instant::now() + BATCH;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(batch_end) => break,
                ok = services.next() => if !ok { break },
                ok = slices.next() => if !ok { break },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_is_read_only_with_namespace_name_and_spec() {
        let full: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "web"}, "spec": {"clusterIP": "10.43.0.9"}
        }))
        .unwrap();
        let (ns, name, spec) = named_spec(&full).unwrap();
        assert_eq!(
            (ns, name, spec.cluster_ip.as_deref()),
            ("ns", "web", Some("10.43.0.9"))
        );
        for missing in ["namespace", "name"] {
            let mut svc = full.clone();
            let meta = &mut svc.metadata;
            *if missing == "name" {
                &mut meta.name
            } else {
                &mut meta.namespace
            } = None;
            assert!(named_spec(&svc).is_none(), "without {missing}");
        }
        let no_spec = Service { spec: None, ..full };
        assert!(named_spec(&no_spec).is_none(), "without a spec");
    }
}
