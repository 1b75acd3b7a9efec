//! One APIService as the aggregator routes by it: the group-version, who serves it, how its
//! server is trusted and where it ranks in discovery. Parsed from the stored object.

use base64::Engine;
use serde_json::Value;

/// The Service an APIService's group-version is served by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

impl ServiceRef {
    /// The name its serving certificate is checked against: `<name>.<namespace>.svc`.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub name: String,
    pub group: String,
    pub version: String,
    /// `None`: served by this process (a local APIService).
    pub service: Option<ServiceRef>,
    /// PEM roots for the server's certificate.
    pub ca_bundle: Option<Vec<u8>>,
    pub insecure_skip_tls_verify: bool,
    pub group_priority_minimum: i64,
    pub version_priority: i64,
    /// The stored `Available` condition's status (`True`/`False`/`Unknown`), if any.
    pub available: Option<String>,
}

fn str_at<'a>(v: &'a Value, path: &str) -> &'a str {
    v.pointer(path).and_then(Value::as_str).unwrap_or_default()
}

impl Registration {
    /// The registration an admitted APIService describes (`None` for one without a version).
    pub fn parse(obj: &Value) -> Option<Registration> {
        let spec = obj.get("spec")?;
        let version = str_at(spec, "/version");
        if version.is_empty() {
            return None;
        }
        let service = spec
            .get("service")
            .filter(|s| s.is_object())
            .map(|s| ServiceRef {
                namespace: str_at(s, "/namespace").to_string(),
                name: str_at(s, "/name").to_string(),
                port: s
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            });
        let ca_bundle = spec
            .get("caBundle")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok());
        let available = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| str_at(c, "/type") == "Available")
            .map(|c| str_at(c, "/status").to_string());
        Some(Registration {
            name: str_at(obj, "/metadata/name").to_string(),
            group: str_at(spec, "/group").to_string(),
            version: version.to_string(),
            service,
            ca_bundle,
            insecure_skip_tls_verify: spec
                .get("insecureSkipTLSVerify")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            group_priority_minimum: spec
                .get("groupPriorityMinimum")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            version_priority: spec
                .get("versionPriority")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            available,
        })
    }

    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Upstream's order of a group's versions: the highest `versionPriority` first, ties by the
/// Kubernetes-aware version order (GA before beta before alpha, higher numbers first).
pub fn sort_versions(regs: &mut [Registration]) {
    regs.sort_by(|a, b| {
        b.version_priority
            .cmp(&a.version_priority)
            .then_with(|| kube_version_rank(&b.version).cmp(&kube_version_rank(&a.version)))
            .then_with(|| a.version.cmp(&b.version))
    });
}

/// A version's rank in upstream's `CompareKubeAwareVersionStrings`: `v2` > `v1` > `v1beta2` >
/// `v1beta1` > `v1alpha1` > anything not of that shape.
fn kube_version_rank(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    let (stage, num) = if tail.is_empty() {
        (3, "")
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    let minor = if stage == 3 {
        0
    } else {
        match num.parse::<u64>() {
            Ok(n) => n,
            Err(_) => return (0, 0, 0),
        }
    };
    (stage, major, minor)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_remote_api_service_parses_with_its_defaults() {
        let obj = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": "kube-system", "name": "metrics-server"},
                     "caBundle": "LS0t", "groupPriorityMinimum": 100, "versionPriority": 100},
            "status": {"conditions": [{"type": "Available", "status": "False"}]}});
        let r = Registration::parse(&obj).unwrap();
        assert_eq!(
            r.service,
            Some(ServiceRef {
                namespace: "kube-system".into(),
                name: "metrics-server".into(),
                port: 443
            })
        );
        assert_eq!(r.ca_bundle.as_deref(), Some(&b"---"[..]));
        assert_eq!(r.available.as_deref(), Some("False"));
        assert_eq!(r.group_version(), "metrics.k8s.io/v1beta1");
        assert_eq!(
            r.service.unwrap().server_name(),
            "metrics-server.kube-system.svc"
        );
        let local = json!({"metadata": {"name": "v1."}, "spec": {"version": "v1",
            "groupPriorityMinimum": 18000, "versionPriority": 1}});
        let r = Registration::parse(&local).unwrap();
        assert_eq!(
            (r.service.clone(), r.group_version().as_str()),
            (None, "v1")
        );
    }

    #[test]
    fn versions_sort_by_priority_then_kube_aware_order() {
        let reg = |v: &str, p: i64| Registration {
            name: format!("{v}.example.com"),
            group: "example.com".into(),
            version: v.into(),
            service: None,
            ca_bundle: None,
            insecure_skip_tls_verify: false,
            group_priority_minimum: 100,
            version_priority: p,
            available: None,
        };
        let mut regs = vec![
            reg("v1alpha1", 10),
            reg("v1beta1", 10),
            reg("v2", 10),
            reg("v1", 10),
            reg("v1beta2", 10),
            reg("foo", 10),
            reg("v3alpha1", 20),
        ];
        sort_versions(&mut regs);
        let order: Vec<&str> = regs.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(
            order,
            [
                "v3alpha1", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }
}
