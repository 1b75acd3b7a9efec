//! Where a `clientConfig.service` webhook is reached: the Service's port with the webhook's
//! port number, then a ready endpoint of its EndpointSlices serving that port (by the port's
//! name), as upstream's endpoint service resolver picks one. The TLS server name stays the
//! Service's DNS name, `<name>.<namespace>.svc`.

use serde_json::Value;

/// The label linking an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The address and port to dial for `service`'s port `port`, from its `slices`.
pub fn resolve(service: &Value, slices: &[Value], port: u16) -> Result<(String, u16), String> {
    let name = format!(
        "{}/{}",
        service
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        service
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    );
    let service_port = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
    let port_name = service_port
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for slice in slices {
        let Some(target) = slice
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == port_name)
            .and_then(|p| p.get("port").and_then(Value::as_u64))
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        let ready = slice
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false));
        for e in ready {
            if let Some(addr) = e
                .get("addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
            {
                return Ok((addr.to_string(), target));
            }
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_service_port_resolves_to_a_ready_endpoint_and_its_target_port() {
        let service = json!({"metadata": {"namespace": "hooks", "name": "svc"},
            "spec": {"ports": [{"name": "metrics", "port": 9090}, {"name": "https", "port": 443, "targetPort": 8443}]}});
        let slice = |ready: bool, ip: &str| {
            json!({"ports": [{"name": "metrics", "port": 9090}, {"name": "https", "port": 8443}],
                   "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}]})
        };
        type Case = (&'static str, Vec<Value>, u16, Result<(String, u16), String>);
        let cases: Vec<Case> = vec![
            (
                "the ready endpoint on the named target port",
                vec![slice(false, "10.42.0.5"), slice(true, "10.42.0.6")],
                443,
                Ok(("10.42.0.6".into(), 8443)),
            ),
            (
                "no ready endpoint",
                vec![slice(false, "10.42.0.5")],
                443,
                Err("no endpoints available for service \"hooks/svc\"".into()),
            ),
            (
                "a port the service does not have",
                vec![slice(true, "10.42.0.6")],
                8443,
                Err("no service port 8443 found for service \"hooks/svc\"".into()),
            ),
            (
                "another port of the same slices",
                vec![slice(true, "10.42.0.6")],
                9090,
                Ok(("10.42.0.6".into(), 9090)),
            ),
        ];
        for (name, slices, port, want) in cases {
            assert_eq!(resolve(&service, &slices, port), want, "{name}");
        }
        let unnamed = json!({"metadata": {"namespace": "n", "name": "s"},
            "spec": {"ports": [{"port": 443}]}});
        let slices = [json!({"ports": [{"port": 9443}],
            "endpoints": [{"addresses": ["10.42.1.2"]}]})];
        assert_eq!(
            resolve(&unnamed, &slices, 443),
            Ok(("10.42.1.2".into(), 9443))
        );
    }
}
