//! One stored webhook, ready to match and call: its configuration parsed once (selectors,
//! rules, match conditions compiled, the client configuration and the CA bundle), with the
//! v1 defaults applied where an object stored without them leaves a field out.

use std::time::Duration;

use berth_shared::cel::Program;
use berth_shared::k8s_openapi::ByteString;
use berth_shared::k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, MutatingWebhookConfiguration, NamedRuleWithOperations,
    RuleWithOperations, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use crate::admission_policy::matching::Constraints;

/// An `AdmissionReview` version the API server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    pub fn parse(v: &str) -> Option<ReviewVersion> {
        match v {
            "v1" => Some(ReviewVersion::V1),
            "v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// Where a webhook is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Client {
    /// `clientConfig.url`, as given.
    Url(String),
    /// `clientConfig.service`: resolved per call through the Service's EndpointSlices.
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook of a configuration.
#[derive(Debug)]
pub struct Hook {
    /// The webhook's own name (`x.example.com`), as messages name it.
    pub name: String,
    /// The configuration it belongs to: webhooks run ordered by it, then by position.
    pub configuration: String,
    /// `Err` for a stored object whose selectors do not parse: decided by the failure policy.
    pub constraints: Result<Constraints, String>,
    pub match_conditions: Vec<(String, Result<Program, String>)>,
    /// `failurePolicy: Ignore`.
    pub ignore_failures: bool,
    pub timeout: Duration,
    /// `sideEffects` is `None` or `NoneOnDryRun`: the webhook may be called for dry runs.
    pub dry_run_safe: bool,
    /// The review version sent: the first of `admissionReviewVersions` the API server
    /// knows (`v1`, `v1beta1`), as upstream picks it; `None` fails every call.
    pub review_version: Option<ReviewVersion>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke_if_needed: bool,
    pub client: Client,
    /// `clientConfig.caBundle`, PEM.
    pub ca_bundle: Option<Vec<u8>>,
}

fn client(c: &WebhookClientConfig) -> Client {
    match (&c.url, &c.service) {
        (Some(url), _) => Client::Url(url.clone()),
        (None, Some(s)) => Client::Service {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            path: s.path.clone().unwrap_or_default(),
            port: s.port.and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
        },
        // Validation refuses it; an old stored object fails its calls.
        (None, None) => Client::Url(String::new()),
    }
}

fn named(r: &RuleWithOperations) -> NamedRuleWithOperations {
    NamedRuleWithOperations {
        api_groups: r.api_groups.clone(),
        api_versions: r.api_versions.clone(),
        operations: r.operations.clone(),
        resources: r.resources.clone(),
        scope: r.scope.clone(),
        resource_names: None,
    }
}

/// The fields both kinds share.
struct Fields<'a> {
    name: &'a str,
    client_config: &'a WebhookClientConfig,
    rules: Option<&'a Vec<RuleWithOperations>>,
    failure_policy: Option<&'a str>,
    match_policy: Option<&'a str>,
    namespace_selector: Option<&'a LabelSelector>,
    object_selector: Option<&'a LabelSelector>,
    side_effects: &'a str,
    timeout_seconds: Option<i32>,
    admission_review_versions: &'a [String],
    match_conditions: Option<&'a Vec<MatchCondition>>,
}

macro_rules! fields {
    ($w:expr) => {
        Fields {
            name: &$w.name,
            client_config: &$w.client_config,
            rules: $w.rules.as_ref(),
            failure_policy: $w.failure_policy.as_deref(),
            match_policy: $w.match_policy.as_deref(),
            namespace_selector: $w.namespace_selector.as_ref(),
            object_selector: $w.object_selector.as_ref(),
            side_effects: &$w.side_effects,
            timeout_seconds: $w.timeout_seconds,
            admission_review_versions: &$w.admission_review_versions,
            match_conditions: $w.match_conditions.as_ref(),
        }
    };
}

fn compile(configuration: &str, f: Fields<'_>, reinvoke_if_needed: bool) -> Hook {
    // A webhook without rules matches nothing, as upstream's rule matcher; an empty
    // `resourceRules` would mean "everything" to the shared constraint matcher.
    let rules: Vec<NamedRuleWithOperations> =
        f.rules.iter().copied().flatten().map(named).collect();
    let constraints = if rules.is_empty() {
        Err(String::new())
    } else {
        Constraints::new(&MatchResources {
            namespace_selector: f.namespace_selector.cloned(),
            object_selector: f.object_selector.cloned(),
            resource_rules: Some(rules),
            exclude_resource_rules: None,
            match_policy: f.match_policy.map(str::to_string),
        })
    };
    let timeout = f
        .timeout_seconds
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
        .unwrap_or(10);
    Hook {
        name: f.name.to_string(),
        configuration: configuration.to_string(),
        constraints,
        match_conditions: f
            .match_conditions
            .into_iter()
            .flatten()
            .map(|c| {
                let program = Program::compile(c.expression.trim())
                    .map_err(|e| format!("compilation failed: {e}"));
                (c.name.clone(), program)
            })
            .collect(),
        ignore_failures: f.failure_policy == Some("Ignore"),
        timeout: Duration::from_secs(timeout),
        dry_run_safe: matches!(f.side_effects, "None" | "NoneOnDryRun"),
        review_version: f
            .admission_review_versions
            .iter()
            .find_map(|v| ReviewVersion::parse(v)),
        reinvoke_if_needed,
        client: client(f.client_config),
        ca_bundle: f
            .client_config
            .ca_bundle
            .as_ref()
            .map(|ByteString(b)| b.clone())
            .filter(|b| !b.is_empty()),
    }
}

fn configuration_name(obj: &Value) -> String {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl Hook {
    /// Whether the rules can match at all (a webhook without rules never matches).
    pub fn has_rules(&self) -> bool {
        !matches!(&self.constraints, Err(e) if e.is_empty())
    }

    /// The webhooks of a stored ValidatingWebhookConfiguration, in order.
    pub fn validating(obj: &Value) -> Vec<Hook> {
        let config = configuration_name(obj);
        match serde_json::from_value::<ValidatingWebhookConfiguration>(obj.clone()) {
            Ok(c) => c
                .webhooks
                .iter()
                .flatten()
                .map(|w| compile(&config, fields!(w), false))
                .collect(),
            Err(e) => {
                tracing::warn!(configuration = %config, error = %e, "webhook configuration not decoded");
                Vec::new()
            }
        }
    }

    /// The webhooks of a stored MutatingWebhookConfiguration, in order.
    pub fn mutating(obj: &Value) -> Vec<Hook> {
        let config = configuration_name(obj);
        match serde_json::from_value::<MutatingWebhookConfiguration>(obj.clone()) {
            Ok(c) => c
                .webhooks
                .iter()
                .flatten()
                .map(|w| {
                    let again = w.reinvocation_policy.as_deref() == Some("IfNeeded");
                    compile(&config, fields!(w), again)
                })
                .collect(),
            Err(e) => {
                tracing::warn!(configuration = %config, error = %e, "webhook configuration not decoded");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_stored_configuration_compiles_with_its_defaults() {
        let obj = json!({
            "metadata": {"name": "labels"},
            "webhooks": [{
                "name": "add.example.com",
                "clientConfig": {"service": {"namespace": "hooks", "name": "svc"}, "caBundle": "Y2E="},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1beta1", "v1"],
                "reinvocationPolicy": "IfNeeded",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 3,
                "matchConditions": [{"name": "x", "expression": "true"}],
            }, {
                "name": "norules.example.com",
                "clientConfig": {"url": "https://h/x"},
                "sideEffects": "Some",
                "admissionReviewVersions": ["v2"],
            }],
        });
        let hooks = Hook::mutating(&obj);
        assert_eq!(hooks.len(), 2);
        let h = &hooks[0];
        assert_eq!(h.configuration, "labels");
        assert_eq!(
            h.client,
            Client::Service {
                namespace: "hooks".into(),
                name: "svc".into(),
                path: String::new(),
                port: 443
            }
        );
        assert_eq!(h.ca_bundle.as_deref(), Some(&b"ca"[..]));
        assert!(h.ignore_failures && h.dry_run_safe && h.reinvoke_if_needed);
        assert_eq!(h.review_version, Some(ReviewVersion::V1beta1));
        assert_eq!(h.timeout, Duration::from_secs(3));
        assert!(h.has_rules() && h.constraints.is_ok());
        assert!(h.match_conditions[0].1.is_ok());
        let n = &hooks[1];
        assert!(!n.has_rules());
        assert!(!n.ignore_failures && !n.dry_run_safe && !n.reinvoke_if_needed);
        assert_eq!(n.review_version, None);
        assert_eq!(n.timeout, Duration::from_secs(10));
        assert_eq!(n.client, Client::Url("https://h/x".into()));
    }
}
