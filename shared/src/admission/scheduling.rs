//! Pod-spec rules about taints and naming: tolerations, DNS config, host aliases and
//! scheduling gates.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{HostAlias, PodDNSConfig, PodSchedulingGate, Toleration};

use super::field::{FieldError, Path};
use super::names::{dns1123_subdomain, each_invalid, joined_invalid, label_value, qualified_name};

pub(crate) const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A taint or toleration effect; `allow_empty` for tolerations (empty matches every effect).
pub(crate) fn validate_taint_effect(
    effect: &str,
    allow_empty: bool,
    path: &Path,
) -> Vec<FieldError> {
    if effect.is_empty() && !allow_empty {
        return vec![FieldError::required(path, "")];
    }
    if effect.is_empty() || TAINT_EFFECTS.contains(&effect) {
        Vec::new()
    } else {
        vec![FieldError::not_supported(path, effect, TAINT_EFFECTS)]
    }
}

/// Upstream `ValidateTolerations`.
pub(crate) fn validate_tolerations(tols: &[Toleration], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tols.iter().enumerate() {
        let ip = path.index(i);
        let key = t.key.as_deref().unwrap_or_default();
        let op = t.operator.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        if !key.is_empty() {
            errs.extend(each_invalid(&ip.child("key"), key, qualified_name(key)));
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(&ip.child("operator"), op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\""));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                &ip.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                errs.extend(joined_invalid(
                    &ip.child("operator"),
                    value,
                    label_value(value),
                ));
            }
            "Exists" if !value.is_empty() => {
                let v = serde_json::to_value(t).unwrap_or_default();
                errs.push(FieldError::invalid(
                    &ip.child("operator"),
                    v,
                    "value must be empty when `operator` is 'Exists'",
                ));
            }
            "Exists" => {}
            other => errs.push(FieldError::not_supported(
                &ip.child("operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        errs.extend(validate_taint_effect(effect, true, &ip.child("effect")));
    }
    errs
}

fn validate_ip(ip: &str, path: &Path) -> Option<FieldError> {
    ip.parse::<IpAddr>().is_err().then(|| {
        FieldError::invalid(
            path,
            ip,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        )
    })
}

/// Upstream `validatePodDNSConfig`.
pub(crate) fn validate_dns_config(
    cfg: Option<&PodDNSConfig>,
    dns_policy: &str,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if dns_policy == "None" {
        let Some(c) = cfg else {
            return vec![FieldError::required(
                path,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            )];
        };
        if c.nameservers.as_ref().is_none_or(Vec::is_empty) {
            return vec![FieldError::required(
                &path.child("nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )];
        }
    }
    let Some(c) = cfg else { return errs };
    // The resolver's limits: each breach is reported with the whole list as the value.
    let over = |list: &[String], field: &str, breached: bool, limit: &str| {
        breached.then(|| {
            FieldError::invalid(
                &path.child(field),
                list.to_vec(),
                format!("must not have more than {limit}"),
            )
        })
    };
    let ns = c.nameservers.as_deref().unwrap_or_default();
    errs.extend(over(ns, "nameservers", ns.len() > 3, "3 nameservers"));
    for (i, n) in ns.iter().enumerate() {
        errs.extend(validate_ip(n, &path.child("nameservers").index(i)));
    }
    let searches = c.searches.as_deref().unwrap_or_default();
    errs.extend(over(
        searches,
        "searches",
        searches.len() > 32,
        "32 search paths",
    ));
    errs.extend(over(
        searches,
        "searches",
        searches.join(" ").len() > 2048,
        "2048 characters (including spaces) in the search list",
    ));
    for (i, s) in searches.iter().enumerate() {
        let s = s.strip_suffix('.').unwrap_or(s);
        errs.extend(each_invalid(
            &path.child("searches").index(i),
            s,
            dns1123_subdomain(s),
        ));
    }
    for (i, o) in c.options.iter().flatten().enumerate() {
        if o.name.as_deref().unwrap_or_default().is_empty() {
            errs.push(FieldError::required(
                &path.child("options").index(i),
                "must not be empty",
            ));
        }
    }
    errs
}

/// Upstream `ValidateHostAliases`.
pub(crate) fn validate_host_aliases(aliases: &[HostAlias], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, a) in aliases.iter().enumerate() {
        errs.extend(validate_ip(&a.ip, &path.index(i).child("ip")));
        for (j, h) in a.hostnames.iter().flatten().enumerate() {
            errs.extend(each_invalid(
                &path.index(i).child("hostnames").index(j),
                h,
                dns1123_subdomain(h),
            ));
        }
    }
    errs
}

/// Scheduling gate names are qualified names and unique.
pub(crate) fn validate_scheduling_gates(
    gates: &[PodSchedulingGate],
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, g) in gates.iter().enumerate() {
        errs.extend(each_invalid(
            &path.index(i),
            &g.name,
            qualified_name(&g.name),
        ));
        if !seen.insert(g.name.as_str()) {
            errs.push(FieldError::duplicate(&path.index(i), g.name.as_str()));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn tolerations(v: serde_json::Value) -> Vec<String> {
        let t: Vec<Toleration> = serde_json::from_value(v).unwrap();
        error_messages(&validate_tolerations(&t, &Path::new("t")))
    }

    #[test]
    fn toleration_rules() {
        assert!(tolerations(json!([{"operator": "Exists"}, {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}])).is_empty());
        assert_eq!(
            tolerations(json!([{"operator": "Equal", "value": "v"}])),
            vec![
                "t[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\""
            ]
        );
        assert_eq!(
            tolerations(json!([{"key": "k", "operator": "Exists", "value": "v"}]))[0]
                .split(": ")
                .last(),
            Some("value must be empty when `operator` is 'Exists'")
        );
        assert_eq!(
            tolerations(json!([{"key": "k", "operator": "Maybe"}])),
            vec![
                "t[0].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\""
            ]
        );
        assert_eq!(
            tolerations(json!([{"key": "k", "effect": "Evict"}])),
            vec![
                "t[0].effect: Unsupported value: \"Evict\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
            ]
        );
        assert_eq!(
            tolerations(json!([{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}])),
            vec![
                "t[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"
            ]
        );
    }

    #[test]
    fn dns_none_needs_nameservers() {
        assert_eq!(
            validate_dns_config(None, "None", &Path::new("d"))[0].message(),
            "d: Required value: must provide `dnsConfig` when `dnsPolicy` is None"
        );
        let c: PodDNSConfig =
            serde_json::from_value(json!({"nameservers": ["1.1.1.1", "x"]})).unwrap();
        assert_eq!(
            validate_dns_config(Some(&c), "None", &Path::new("d"))[0].message(),
            "d.nameservers[1]: Invalid value: \"x\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        );
    }
}
