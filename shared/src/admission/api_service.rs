//! APIService admission (apiregistration.k8s.io/v1), as the aggregator's own: the service
//! port's default (443) and upstream's `ValidateAPIService`: the name is
//! `<version>.<group>`, priorities in range, and a local APIService (no `service`) carries no
//! TLS settings.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceSpec};

use super::field::{FieldError, Path};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names::{dns1035_label, dns1123_subdomain, each_invalid, port_num};

/// Upstream `SetDefaults_ServiceReference`.
pub(crate) fn default_api_service(s: &mut APIService) {
    if let Some(svc) = s.spec.as_mut().and_then(|spec| spec.service.as_mut()) {
        svc.port.get_or_insert(443);
    }
}

pub(crate) fn validate_api_service(s: &APIService, old: Option<&APIService>) -> Vec<FieldError> {
    let mut errs = match old {
        Some(old) => validate_object_meta_update(&s.metadata, &old.metadata),
        None => validate_object_meta(&s.metadata, "APIService", false),
    };
    let default = APIServiceSpec::default();
    let spec = s.spec.as_ref().unwrap_or(&default);
    let group = spec.group.as_deref().unwrap_or_default();
    let version = spec.version.as_deref().unwrap_or_default();
    let required = format!("{version}.{group}");
    let name = s.metadata.name.as_deref().unwrap_or_default();
    if !name.is_empty() && name != required {
        errs.push(FieldError::invalid(
            &Path::new("metadata").child("name"),
            name,
            format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
        ));
    }
    let spec_path = Path::new("spec");
    if group.is_empty() && version != "v1" {
        errs.push(FieldError::required(
            &spec_path.child("group"),
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        errs.extend(each_invalid(
            &spec_path.child("group"),
            group,
            dns1123_subdomain(group),
        ));
    }
    errs.extend(each_invalid(
        &spec_path.child("version"),
        version,
        dns1035_label(version),
    ));
    if !(1..=20000).contains(&spec.group_priority_minimum) {
        errs.push(FieldError::invalid(
            &spec_path.child("groupPriorityMinimum"),
            spec.group_priority_minimum,
            "must be positive and less than 20000",
        ));
    }
    if !(1..=1000).contains(&spec.version_priority) {
        errs.push(FieldError::invalid(
            &spec_path.child("versionPriority"),
            spec.version_priority,
            "must be positive and less than 1000",
        ));
    }
    let insecure = spec.insecure_skip_tls_verify.unwrap_or(false);
    let ca_bytes = spec.ca_bundle.as_ref().map_or(0, |b| b.0.len());
    let Some(service) = &spec.service else {
        if ca_bytes != 0 {
            errs.push(FieldError::invalid(
                &spec_path.child("caBundle"),
                format!("{ca_bytes} bytes"),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errs.push(FieldError::invalid(
                &spec_path.child("insecureSkipTLSVerify"),
                insecure,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errs;
    };
    let service_path = spec_path.child("service");
    if service.namespace.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&service_path.child("namespace"), ""));
    }
    if service.name.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&service_path.child("name"), ""));
    }
    let port = service.port.unwrap_or(443);
    let port_errs = port_num(i64::from(port));
    if !port_errs.is_empty() {
        errs.push(FieldError::invalid(
            &service_path.child("port"),
            port,
            format!("port is not valid: {}", port_errs.join(", ")),
        ));
    }
    if insecure && ca_bytes > 0 {
        errs.push(FieldError::invalid(
            &spec_path.child("insecureSkipTLSVerify"),
            insecure,
            "may not be true if caBundle is present",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{Operation, admit, field::error_messages};

    fn admitted(obj: Value) -> Result<Value, Vec<String>> {
        let mut obj = obj;
        match admit("APIService", Operation::Create, &mut obj, None) {
            Ok(()) => Ok(obj),
            Err(super::super::AdmissionError::Invalid(errs)) => Err(error_messages(&errs)),
            Err(e) => Err(vec![e.to_string()]),
        }
    }

    fn api_service(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn a_service_port_defaults_to_443() {
        let obj = admitted(api_service(
            "v1beta1.metrics.k8s.io",
            json!({"group": "metrics.k8s.io", "version": "v1beta1",
                   "service": {"namespace": "kube-system", "name": "metrics-server"},
                   "insecureSkipTLSVerify": true,
                   "groupPriorityMinimum": 100, "versionPriority": 100}),
        ))
        .unwrap();
        assert_eq!(obj["spec"]["service"]["port"], 443);
    }

    #[test]
    fn upstreams_messages_for_each_rule() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "v1.other.example.com",
                json!({"group": "example.com", "version": "v1",
                       "groupPriorityMinimum": 100, "versionPriority": 10}),
                vec![
                    "metadata.name: Invalid value: \"v1.other.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.example.com\"",
                ],
            ),
            (
                "v1.example.com",
                json!({"group": "example.com", "version": "v1",
                       "groupPriorityMinimum": 0, "versionPriority": 1001}),
                vec![
                    "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                    "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
                ],
            ),
            (
                "v1.example.com",
                json!({"group": "example.com", "version": "v1", "caBundle": "AAAA",
                       "groupPriorityMinimum": 100, "versionPriority": 10}),
                vec![
                    "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle",
                ],
            ),
            (
                "v1.example.com",
                json!({"group": "example.com", "version": "v1", "caBundle": "AAAA",
                       "insecureSkipTLSVerify": true, "service": {"port": 70000},
                       "groupPriorityMinimum": 100, "versionPriority": 10}),
                vec![
                    "spec.service.namespace: Required value",
                    "spec.service.name: Required value",
                    "spec.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive",
                    "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
                ],
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                admitted(api_service(name, spec)).unwrap_err(),
                want,
                "{name}"
            );
        }
    }
}
