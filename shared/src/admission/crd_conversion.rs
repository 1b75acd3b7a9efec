//! A CustomResourceDefinition's `spec.conversion` (apiextensions.k8s.io/v1): upstream's
//! defaults (strategy `None`, a Service port of 443) and `validateCustomResourceConversion`:
//! a `Webhook` strategy needs the webhook's client configuration (a URL or a Service, as for
//! admission webhooks) and `conversionReviewVersions` naming a version this server speaks,
//! and `preserveUnknownFields` false; a `None` strategy takes neither. Errors carry upstream's
//! paths, which are the internal type's (`spec.conversion.webhookClientConfig`).

use k8s_openapi::api::admissionregistration::v1::{ServiceReference, WebhookClientConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use serde_json::Value;

use super::field::{FieldError, Path};
use super::names::{dns1035_label, each_invalid};

/// The `ConversionReview` versions this server sends, sorted as upstream lists them.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// Upstream's defaults: no conversion is `None`; a webhook Service's port is 443.
pub(crate) fn default_conversion(crd: &mut CustomResourceDefinition) {
    let conversion = crd
        .spec
        .conversion
        .get_or_insert_with(|| CustomResourceConversion {
            strategy: "None".into(),
            webhook: None,
        });
    if let Some(service) = conversion
        .webhook
        .as_mut()
        .and_then(|w| w.client_config.as_mut())
        .and_then(|c| c.service.as_mut())
    {
        service.port.get_or_insert(443);
    }
}

pub(crate) fn validate_conversion(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(conversion) = &crd.spec.conversion else {
        return errs;
    };
    let p = Path::new("spec").child("conversion");
    let client_path = p.child("webhookClientConfig");
    let versions_path = p.child("conversionReviewVersions");
    let client = conversion
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.as_ref());
    let versions = conversion
        .webhook
        .as_ref()
        .map(|w| w.conversion_review_versions.as_slice())
        .unwrap_or_default();
    match conversion.strategy.as_str() {
        "Webhook" => {
            match client {
                None => errs.push(FieldError::required(
                    &client_path,
                    "required when strategy is set to Webhook",
                )),
                Some(c) => errs.extend(super::admission_webhook::validate_client_config(
                    &admission_client(c),
                    &client_path,
                )),
            }
            errs.extend(validate_review_versions(versions, &versions_path));
            if crd.spec.preserve_unknown_fields == Some(true) {
                errs.push(FieldError::invalid(
                    &p.child("strategy"),
                    "Webhook",
                    "must be None if spec.preserveUnknownFields is true",
                ));
            }
        }
        "None" => {
            if client.is_some() {
                errs.push(FieldError::forbidden(
                    &client_path,
                    "should not be set when strategy is not set to Webhook",
                ));
            }
            if !versions.is_empty() {
                errs.push(FieldError::forbidden(
                    &versions_path,
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        // Another strategy is refused with the definition's other fields.
        _ => {}
    }
    errs
}

/// Upstream `validateConversionReviewVersions`, recognized versions required.
fn validate_review_versions(versions: &[String], p: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if versions.is_empty() {
        errs.push(FieldError::required(p, ""));
        return errs;
    }
    let mut seen = std::collections::HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(v.as_str()) {
            errs.push(FieldError::invalid(
                &p.index(i),
                v.as_str(),
                "duplicate version",
            ));
            continue;
        }
        errs.extend(each_invalid(&p.index(i), v, dns1035_label(v)));
    }
    if !versions
        .iter()
        .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
    {
        errs.push(FieldError::invalid(
            p,
            Value::from(versions.to_vec()),
            format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errs
}

/// The definition's client configuration in the admission webhooks' type (the same fields),
/// so both are judged by one function.
fn admission_client(
    c: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig,
) -> WebhookClientConfig {
    WebhookClientConfig {
        ca_bundle: c.ca_bundle.clone(),
        url: c.url.clone(),
        service: c.service.as_ref().map(|s| ServiceReference {
            name: s.name.clone(),
            namespace: s.namespace.clone(),
            path: s.path.clone(),
            port: s.port,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(conversion: Value, preserve: bool) -> CustomResourceDefinition {
        let mut spec = json!({
            "group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [],
            "conversion": conversion,
        });
        if preserve {
            spec["preserveUnknownFields"] = json!(true);
        }
        serde_json::from_value(
            json!({"metadata": {"name": "crontabs.stable.example.com"}, "spec": spec}),
        )
        .expect("a definition")
    }

    fn messages(conversion: Value, preserve: bool) -> Vec<String> {
        let mut c = crd(conversion, preserve);
        default_conversion(&mut c);
        validate_conversion(&c)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn conversion_is_judged_with_upstreams_messages() {
        let service = json!({"service": {"namespace": "ops", "name": "conv", "path": "/convert"}});
        let cases: Vec<(&str, Value, bool, Vec<&str>)> = vec![
            (
                "a webhook by service with v1 reviews",
                json!({"strategy": "Webhook", "webhook": {"clientConfig": service, "conversionReviewVersions": ["v1", "v1beta1"]}}),
                false,
                vec![],
            ),
            (
                "a webhook by URL",
                json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://conv.example.com/convert"}, "conversionReviewVersions": ["v1beta1"]}}),
                false,
                vec![],
            ),
            ("None", json!({"strategy": "None"}), false, vec![]),
            (
                "a webhook without its configuration",
                json!({"strategy": "Webhook"}),
                false,
                vec![
                    "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                    "spec.conversion.conversionReviewVersions: Required value",
                ],
            ),
            (
                "review versions this server does not speak",
                json!({"strategy": "Webhook", "webhook": {"clientConfig": service, "conversionReviewVersions": ["v2", "v2"]}}),
                false,
                vec![
                    "spec.conversion.conversionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
                    "spec.conversion.conversionReviewVersions: Invalid value: []string{\"v2\", \"v2\"}: must include at least one of v1, v1beta1",
                ],
            ),
            (
                "both a URL and a service",
                json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://a.b/c", "service": {"namespace": "n", "name": "s"}}, "conversionReviewVersions": ["v1"]}}),
                false,
                vec![
                    "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required",
                ],
            ),
            (
                "a plain http URL",
                json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "http://a.b/c"}, "conversionReviewVersions": ["v1"]}}),
                false,
                vec![
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"http://a.b/c\": 'https' is the only allowed URL scheme",
                ],
            ),
            (
                "a service without a name",
                json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "n", "name": ""}}, "conversionReviewVersions": ["v1"]}}),
                false,
                vec![
                    "spec.conversion.webhookClientConfig.service.name: Required value: service name is required",
                ],
            ),
            (
                "a webhook with unknown fields preserved",
                json!({"strategy": "Webhook", "webhook": {"clientConfig": service, "conversionReviewVersions": ["v1"]}}),
                true,
                vec![
                    "spec.conversion.strategy: Invalid value: \"Webhook\": must be None if spec.preserveUnknownFields is true",
                ],
            ),
            (
                "None with a webhook",
                json!({"strategy": "None", "webhook": {"clientConfig": service, "conversionReviewVersions": ["v1"]}}),
                false,
                vec![
                    "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                    "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
                ],
            ),
        ];
        for (name, conversion, preserve, want) in cases {
            assert_eq!(messages(conversion, preserve), want, "{name}");
        }
    }

    #[test]
    fn a_missing_conversion_is_none_and_a_service_port_443() {
        let mut c = crd(Value::Null, false);
        c.spec.conversion = None;
        default_conversion(&mut c);
        assert_eq!(
            c.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
            Some("None")
        );
        let mut c = crd(
            json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "n", "name": "s"}}, "conversionReviewVersions": ["v1"]}}),
            false,
        );
        default_conversion(&mut c);
        let port = c
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.service)
            .and_then(|s| s.port);
        assert_eq!(port, Some(443));
    }
}
