//! The `kubernetes` Service in `default` and its Endpoints and EndpointSlice, as
//! kube-apiserver keeps them: the first address of the service range, port 443 (`https`)
//! pointing at this controller's address and port. Written at start-up, rewritten when the
//! address or port changed.

use serde_json::{Value, json};

use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::resource::{self, ResourceType};

const NAME: &str = "kubernetes";
const NAMESPACE: &str = "default";

/// Makes sure the Service, Endpoints and EndpointSlice name `address`:`port`.
pub fn ensure(
    registry: &Registry,
    address: std::net::IpAddr,
    port: u16,
) -> Result<(), RegistryError> {
    let labels = json!({"component": "apiserver", "provider": "kubernetes"});
    let ip = registry.service_ranges().first().to_string();
    put(
        registry,
        resource::SERVICES,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                     "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                "targetPort": port}]}}),
        &["spec"],
    )?;
    put(
        registry,
        resource::ENDPOINTS,
        json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                         "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": address.to_string()}],
                         "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}),
        &["subsets"],
    )?;
    let address_type = if address.is_ipv4() { "IPv4" } else { "IPv6" };
    put(
        registry,
        resource::ENDPOINT_SLICES,
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                         "labels": {"kubernetes.io/service-name": NAME}},
            "addressType": address_type,
            "endpoints": [{"addresses": [address.to_string()],
                           "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
        &["endpoints", "ports", "addressType"],
    )
}

/// Creates `obj`, or rewrites the `fields` of the stored one when they differ.
fn put(
    registry: &Registry,
    rt: &ResourceType,
    obj: Value,
    fields: &[&str],
) -> Result<(), RegistryError> {
    let opts = WriteOptions::default();
    // Looked up first: creating the Service again would fail on its taken address (422)
    // before the name is compared.
    match registry.get(rt, Some(NAMESPACE), NAME) {
        Err(RegistryError::NotFound { .. }) => {
            return match registry.create(rt, Some(NAMESPACE), obj.clone(), &opts) {
                Err(RegistryError::AlreadyExists { .. }) => Ok(()),
                other => other.map(|_| ()),
            };
        }
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    registry.update_with(
        rt,
        Some(NAMESPACE),
        NAME,
        Part::Main,
        &opts,
        |mut stored| {
            for f in fields {
                if let (Some(s), Some(v)) = (stored.as_object_mut(), obj.get(*f)) {
                    s.insert(f.to_string(), v.clone());
                }
            }
            Ok::<_, RegistryError>(stored)
        },
    )?;
    Ok(())
}
