//! A pod's `/etc/resolv.conf` as the kubelet computes it from `dnsPolicy` and `dnsConfig`
//! (pure).
//!
//! Planner: pure, no I/O.

use k8s_openapi::api::core::v1::Pod;

/// The cluster's DNS service as the agent knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDns {
    /// Cluster DNS server addresses (kubelet `--cluster-dns`); empty when there is none, in
    /// which case `ClusterFirst` pods fall back to the host's settings as the kubelet does.
    pub servers: Vec<String>,
    /// Cluster domain (kubelet `--cluster-domain`), `cluster.local`.
    pub domain: String,
}

impl Default for ClusterDns {
    fn default() -> Self {
        ClusterDns {
            servers: Vec::new(),
            domain: "cluster.local".into(),
        }
    }
}

/// The three things a resolv.conf says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// A warning the kubelet would record as an Event (`reason`, `message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsWarning {
    pub reason: &'static str,
    pub message: String,
}

/// Limits the kubelet enforces (ExpandedDNSConfig, GA since 1.28).
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCH_PATHS: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;
const MAX_SEARCH_PATH_LEN: usize = 253;

/// Parses a resolv.conf like the kubelet: `nameserver` lines accumulate, the last `search`
/// line wins (trailing dots dropped), the last `options` line wins; comments are skipped.
pub fn parse_resolv_conf(text: &str) -> ResolvConf {
    let mut conf = ResolvConf::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => conf.servers.extend(fields.next().map(String::from)),
            Some("search") => {
                conf.searches = fields
                    .map(|s| s.trim_end_matches('.').to_string())
                    .collect();
            }
            Some("options") => conf.options = fields.map(String::from).collect(),
            _ => {}
        }
    }
    conf
}

impl ResolvConf {
    /// The file, in the order and form containerd's CRI writes it; empty when there is
    /// nothing to say (the caller then copies the host's file, as containerd does).
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.searches.is_empty() {
            out.push_str(&format!("search {}\n", self.searches.join(" ")));
        }
        for server in &self.servers {
            out.push_str(&format!("nameserver {server}\n"));
        }
        if !self.options.is_empty() {
            out.push_str(&format!("options {}\n", self.options.join(" ")));
        }
        out
    }
}

/// The pod's resolver settings, and the warnings the kubelet would emit on the way.
///
/// * `None`: only `dnsConfig`.
/// * `ClusterFirst` (the default; for hostNetwork pods it means `Default`) and
///   `ClusterFirstWithHostNet`: the cluster DNS servers, searches
///   `<ns>.svc.<domain> svc.<domain> <domain>` + the host's, `ndots:5`. Without cluster DNS
///   servers: a `MissingClusterDNS` warning and the host's settings.
/// * `Default`: the host's settings.
///
/// `dnsConfig` is appended (duplicates dropped; options override by name), then limits apply:
/// 3 nameservers, 32 search paths of ≤ 253 chars, 2048 chars in the search line.
pub fn pod_resolv_conf(
    pod: &Pod,
    host: &ResolvConf,
    cluster: &ClusterDns,
) -> (ResolvConf, Vec<DnsWarning>) {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut warnings = Vec::new();
    let use_cluster = match policy {
        "None" => None,
        "Default" => Some(false),
        "ClusterFirst" if host_network => Some(false),
        _ => Some(true),
    };
    let mut conf = match use_cluster {
        None => ResolvConf::default(),
        Some(true) if !cluster.servers.is_empty() => ResolvConf {
            servers: cluster.servers.clone(),
            searches: cluster_searches(namespace, &cluster.domain, &host.searches),
            options: vec!["ndots:5".into()],
        },
        Some(cluster_wanted) => {
            if cluster_wanted {
                warnings.push(DnsWarning {
                    reason: "MissingClusterDNS",
                    message: format!(
                        "pod: \"{}_{namespace}({})\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
                        pod.metadata.name.as_deref().unwrap_or_default(),
                        pod.metadata.uid.as_deref().unwrap_or_default(),
                    ),
                });
            }
            host.clone()
        }
    };
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        conf.servers = dedup(
            conf.servers
                .into_iter()
                .chain(extra.nameservers.iter().flatten().cloned()),
        );
        conf.searches = dedup(
            conf.searches
                .into_iter()
                .chain(extra.searches.iter().flatten().cloned()),
        );
        for opt in extra.options.iter().flatten() {
            let Some(name) = opt.name.as_deref() else {
                continue;
            };
            let rendered = match opt.value.as_deref() {
                Some(v) if !v.is_empty() => format!("{name}:{v}"),
                _ => name.to_string(),
            };
            match conf.options.iter().position(|o| option_name(o) == name) {
                Some(i) => conf.options[i] = rendered,
                None => conf.options.push(rendered),
            }
        }
    }
    fit_limits(&mut conf, &mut warnings);
    (conf, warnings)
}

fn cluster_searches(namespace: &str, domain: &str, host: &[String]) -> Vec<String> {
    if domain.is_empty() {
        return host.to_vec();
    }
    let cluster = [
        format!("{namespace}.svc.{domain}"),
        format!("svc.{domain}"),
        domain.to_string(),
    ];
    dedup(cluster.into_iter().chain(host.iter().cloned()))
}

fn option_name(opt: &str) -> &str {
    opt.split_once(':').map_or(opt, |(name, _)| name)
}

fn dedup(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn fit_limits(conf: &mut ResolvConf, warnings: &mut Vec<DnsWarning>) {
    if conf.servers.len() > MAX_NAMESERVERS {
        conf.servers.truncate(MAX_NAMESERVERS);
        warnings.push(DnsWarning {
            reason: "DNSConfigForming",
            message: format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                conf.servers.join(" ")
            ),
        });
    }
    let mut exceeded = conf.searches.len() > MAX_SEARCH_PATHS;
    conf.searches.truncate(MAX_SEARCH_PATHS);
    let before = conf.searches.len();
    conf.searches.retain(|s| s.len() <= MAX_SEARCH_PATH_LEN);
    exceeded |= conf.searches.len() != before;
    // Drop paths from the end until the line fits.
    while conf.searches.join(" ").len() > MAX_SEARCH_CHARS {
        conf.searches.pop();
        exceeded = true;
    }
    if exceeded {
        warnings.push(DnsWarning {
            reason: "DNSConfigForming",
            message: format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                conf.searches.join(" ")
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodDNSConfig, PodDNSConfigOption, PodSpec};

    fn host() -> ResolvConf {
        parse_resolv_conf(
            "# generated\nsearch corp.example. lab.example\nnameserver 10.255.255.53\n\
             nameserver 10.255.255.54\noptions edns0 ndots:2\n",
        )
    }

    fn pod(policy: Option<&str>, host_network: bool, dns: Option<PodDNSConfig>) -> Pod {
        Pod {
            metadata: crate::pod::model::fixtures::web("shop", "u1"),
            spec: Some(PodSpec {
                dns_policy: policy.map(String::from),
                host_network: Some(host_network),
                dns_config: dns,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cluster() -> ClusterDns {
        ClusterDns {
            servers: vec!["10.43.0.10".into()],
            domain: "cluster.local".into(),
        }
    }

    /// The resolv.conf of a pod with `policy` and its own `dnsConfig`, and the warnings.
    fn with_dns_config(policy: &str, extra: PodDNSConfig) -> (ResolvConf, Vec<DnsWarning>) {
        pod_resolv_conf(&pod(Some(policy), false, Some(extra)), &host(), &cluster())
    }

    #[test]
    fn parsing_accumulates_nameservers_and_keeps_the_last_search_and_options() {
        let c = parse_resolv_conf(
            "nameserver 1.1.1.1\nsearch a.\nsearch b c\n  # nameserver 9.9.9.9\noptions x\noptions y z\nnameserver 8.8.8.8\ndomain d\n",
        );
        assert_eq!(c.servers, vec!["1.1.1.1", "8.8.8.8"]);
        assert_eq!(c.searches, vec!["b", "c"]);
        assert_eq!(c.options, vec!["y", "z"]);
        assert_eq!(host().searches, vec!["corp.example", "lab.example"]);
    }

    #[test]
    fn policies_pick_their_base_like_the_kubelet() {
        let cluster_first = ResolvConf {
            servers: vec!["10.43.0.10".into()],
            searches: vec![
                "shop.svc.cluster.local".into(),
                "svc.cluster.local".into(),
                "cluster.local".into(),
                "corp.example".into(),
                "lab.example".into(),
            ],
            options: vec!["ndots:5".into()],
        };
        let table = [
            (None, false, cluster_first.clone()),
            (Some("ClusterFirst"), false, cluster_first.clone()),
            (Some("ClusterFirst"), true, host()),
            (Some("ClusterFirstWithHostNet"), true, cluster_first.clone()),
            (Some("Default"), false, host()),
            (Some("None"), false, ResolvConf::default()),
        ];
        for (policy, host_net, want) in table {
            let (got, warnings) =
                pod_resolv_conf(&pod(policy, host_net, None), &host(), &cluster());
            assert_eq!(got, want, "{policy:?} hostNetwork={host_net}");
            assert!(warnings.is_empty());
        }
    }

    #[test]
    fn cluster_first_without_cluster_dns_falls_back_to_the_host_with_a_warning() {
        let (got, warnings) =
            pod_resolv_conf(&pod(None, false, None), &host(), &ClusterDns::default());
        assert_eq!(got, host());
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].reason, "MissingClusterDNS");
        assert!(
            warnings[0]
                .message
                .contains("Falling back to \"Default\" policy")
        );
    }

    #[test]
    fn dns_config_is_appended_deduplicated_and_overrides_options_by_name() {
        let extra = PodDNSConfig {
            nameservers: Some(vec!["10.255.255.53".into(), "192.0.2.1".into()]),
            searches: Some(vec!["lab.example".into(), "extra.example".into()]),
            options: Some(vec![
                PodDNSConfigOption {
                    name: Some("ndots".into()),
                    value: Some("1".into()),
                },
                PodDNSConfigOption {
                    name: Some("single-request".into()),
                    value: None,
                },
            ]),
        };
        let (got, _) = with_dns_config("Default", extra);
        assert_eq!(
            got.servers,
            vec!["10.255.255.53", "10.255.255.54", "192.0.2.1"]
        );
        assert_eq!(
            got.searches,
            vec!["corp.example", "lab.example", "extra.example"]
        );
        assert_eq!(got.options, vec!["edns0", "ndots:1", "single-request"]);
    }

    #[test]
    fn none_policy_uses_only_dns_config() {
        let extra = PodDNSConfig {
            nameservers: Some(vec!["192.0.2.1".into()]),
            searches: Some(vec!["ns1.svc.cluster-domain.example".into()]),
            options: Some(vec![PodDNSConfigOption {
                name: Some("ndots".into()),
                value: Some("2".into()),
            }]),
        };
        let (got, _) = with_dns_config("None", extra);
        assert_eq!(
            got.render(),
            "search ns1.svc.cluster-domain.example\nnameserver 192.0.2.1\noptions ndots:2\n"
        );
    }

    #[test]
    fn limits_cut_nameservers_and_search_paths_with_warnings() {
        let extra = PodDNSConfig {
            nameservers: Some(vec!["192.0.2.1".into(), "192.0.2.2".into()]),
            searches: Some(
                (0..40)
                    .map(|i| format!("s{i}.example"))
                    .chain([format!("{}.example", "x".repeat(250))])
                    .collect(),
            ),
            options: None,
        };
        let (got, warnings) = with_dns_config("Default", extra);
        assert_eq!(
            got.servers,
            vec!["10.255.255.53", "10.255.255.54", "192.0.2.1"]
        );
        assert_eq!(got.searches.len(), 32);
        assert_eq!(got.searches[2], "s0.example");
        let reasons: Vec<&str> = warnings.iter().map(|w| w.reason).collect();
        assert_eq!(reasons, vec!["DNSConfigForming", "DNSConfigForming"]);
    }

    #[test]
    fn an_overlong_search_line_loses_paths_from_the_end() {
        let long: Vec<String> = (0..20)
            .map(|i| format!("{i:02}{}", "a".repeat(120)))
            .collect();
        let extra = PodDNSConfig {
            searches: Some(long),
            ..Default::default()
        };
        let (got, warnings) = with_dns_config("None", extra);
        assert!(got.searches.join(" ").len() <= 2048);
        assert_eq!(got.searches.len(), 16, "16 × 123 chars + 15 spaces = 1983");
        assert!(got.searches[15].starts_with("15"));
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn rendering_follows_containerds_order_and_is_empty_for_nothing() {
        let c = ResolvConf {
            servers: vec!["a".into(), "b".into()],
            searches: vec!["s1".into(), "s2".into()],
            options: vec!["ndots:5".into()],
        };
        assert_eq!(
            c.render(),
            "search s1 s2\nnameserver a\nnameserver b\noptions ndots:5\n"
        );
        assert_eq!(ResolvConf::default().render(), "");
    }
}
