//! A pod's `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname` as the kubelet (and
//! containerd's CRI) write them: pure functions for the contents, and a small writer.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{HostAlias, Pod};

use super::NetworkError;
use super::dns::{self, ClusterDns, DnsWarning};

/// The host's own files, the base for Default DNS and host-network pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFiles {
    pub hosts: String,
    pub resolv_conf: String,
    pub hostname: String,
}

/// The three files of one pod, plus the warnings the kubelet would emit as Events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFiles {
    pub hostname: String,
    pub hosts: String,
    pub resolv_conf: String,
    pub warnings: Vec<DnsWarning>,
}

/// Where [`write_pod_files`] put them (bind-mount sources for every container).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFilePaths {
    pub hostname: PathBuf,
    pub hosts: PathBuf,
    pub resolv_conf: PathBuf,
}

/// A pod's hostname and, with `spec.subdomain`, its domain (`<sub>.<ns>.svc.<cluster domain>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHostname {
    pub hostname: String,
    pub domain: Option<String>,
}

/// Kernel limit for a hostname, which the kubelet also applies to an FQDN hostname.
const MAX_FQDN_HOSTNAME: usize = 64;
/// DNS label limit, for pod names used as hostnames.
const MAX_LABEL: usize = 63;

/// `spec.hostname` or the pod name (cut to 63 chars, trailing `-`/`.` trimmed), and the
/// domain from `spec.subdomain`.
pub fn pod_hostname(pod: &Pod, cluster_domain: &str) -> Result<PodHostname, NetworkError> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let mut hostname = name.to_string();
    if let Some(h) = spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
    {
        if !is_dns_label(h) {
            return Err(invalid("spec.hostname", h, "is not a valid DNS label"));
        }
        hostname = h.to_string();
    }
    if hostname.len() > MAX_LABEL {
        let cut = hostname
            .get(..MAX_LABEL)
            .unwrap_or(&hostname)
            .trim_end_matches(['-', '.']);
        if cut.is_empty() {
            return Err(invalid(
                "metadata.name",
                name,
                "cannot be cut to a valid hostname",
            ));
        }
        hostname = cut.to_string();
    }
    let domain = match spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
    {
        None => None,
        Some(sub) if !is_dns_label(sub) => {
            return Err(invalid("spec.subdomain", sub, "is not a valid DNS label"));
        }
        Some(sub) => {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            Some(format!("{sub}.{ns}.svc.{cluster_domain}"))
        }
    };
    Ok(PodHostname { hostname, domain })
}

fn invalid(field: &'static str, value: &str, reason: &'static str) -> NetworkError {
    NetworkError::InvalidPod {
        field,
        value: value.to_string(),
        reason,
    }
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LABEL
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The kubelet's managed `/etc/hosts` for a pod with its own network.
pub fn managed_hosts(pod_ips: &[String], host: &PodHostname, aliases: &[HostAlias]) -> String {
    let mut out = String::from("# Kubernetes-managed hosts file.\n");
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        match &host.domain {
            Some(domain) => out.push_str(&format!(
                "{ip}\t{}.{domain}\t{}\n",
                host.hostname, host.hostname
            )),
            None => out.push_str(&format!("{ip}\t{}\n", host.hostname)),
        }
    }
    out.push_str(&alias_entries(aliases));
    out
}

/// The kubelet's `/etc/hosts` for a host-network pod: the host's file plus hostAliases.
pub fn host_network_hosts(host_hosts: &str, aliases: &[HostAlias]) -> String {
    format!(
        "# Kubernetes-managed hosts file (host network).\n{host_hosts}{}",
        alias_entries(aliases)
    )
}

fn alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", alias.ip));
    }
    out
}

/// All three files of a pod. `pod_ip` is the pod's address (ignored for host-network pods,
/// which get the host's hostname and hosts file).
pub fn plan_pod_files(
    pod: &Pod,
    pod_ip: Option<Ipv4Addr>,
    host: &HostFiles,
    cluster: &ClusterDns,
) -> Result<PodFiles, NetworkError> {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let aliases = spec
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default();
    let (hostname, hosts) = if host_network {
        (
            host.hostname.trim().to_string(),
            host_network_hosts(&host.hosts, aliases),
        )
    } else {
        let names = pod_hostname(pod, &cluster.domain)?;
        let ips: Vec<String> = pod_ip.iter().map(ToString::to_string).collect();
        let hosts = managed_hosts(&ips, &names, aliases);
        let as_fqdn = spec.and_then(|s| s.set_hostname_as_fqdn).unwrap_or(false);
        let hostname = match (&names.domain, as_fqdn) {
            (Some(domain), true) => {
                let fqdn = format!("{}.{domain}", names.hostname);
                if fqdn.len() > MAX_FQDN_HOSTNAME {
                    return Err(invalid(
                        "spec.setHostnameAsFQDN",
                        &fqdn,
                        "FQDN is too long (64 characters is the max)",
                    ));
                }
                fqdn
            }
            _ => names.hostname,
        };
        (hostname, hosts)
    };
    let (resolv, warnings) =
        dns::pod_resolv_conf(pod, &dns::parse_resolv_conf(&host.resolv_conf), cluster);
    let mut resolv_conf = resolv.render();
    if resolv_conf.is_empty() {
        // Nothing to say: containerd copies the host's file in that case.
        resolv_conf = host.resolv_conf.clone();
    }
    Ok(PodFiles {
        hostname: format!("{hostname}\n"),
        hosts,
        resolv_conf,
        warnings,
    })
}

/// Reads the host's `/etc/hosts`, `/etc/resolv.conf` and hostname.
pub async fn observe_host_files() -> Result<HostFiles, NetworkError> {
    let read = |path: &'static str| async move {
        match tokio::fs::read_to_string(path).await {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(NetworkError::io(path, e)),
        }
    };
    Ok(HostFiles {
        hosts: read("/etc/hosts").await?,
        resolv_conf: read("/etc/resolv.conf").await?,
        hostname: read("/proc/sys/kernel/hostname").await?.trim().to_string(),
    })
}

/// Writes `hostname`, `hosts` and `resolv.conf` into `dir` (created if needed), each
/// replaced atomically so a container starting meanwhile never sees half a file.
pub async fn write_pod_files(dir: &Path, files: &PodFiles) -> Result<PodFilePaths, NetworkError> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| NetworkError::io(dir, e))?;
    let paths = PodFilePaths {
        hostname: dir.join("hostname"),
        hosts: dir.join("hosts"),
        resolv_conf: dir.join("resolv.conf"),
    };
    for (path, content) in [
        (&paths.hostname, &files.hostname),
        (&paths.hosts, &files.hosts),
        (&paths.resolv_conf, &files.resolv_conf),
    ] {
        let tmp = path.with_extension("tmp");
        tokio::fs::write(&tmp, content)
            .await
            .map_err(|e| NetworkError::io(&tmp, e))?;
        tokio::fs::rename(&tmp, path)
            .await
            .map_err(|e| NetworkError::io(path, e))?;
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, f: impl FnOnce(&mut PodSpec)) -> Pod {
        let mut spec = PodSpec::default();
        f(&mut spec);
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: Some(spec),
            ..Default::default()
        }
    }

    fn host() -> HostFiles {
        HostFiles {
            hosts: "127.0.0.1 localhost\n127.0.0.1 vm\n".into(),
            resolv_conf: "nameserver 10.255.255.53\n".into(),
            hostname: "vm".into(),
        }
    }

    fn alias(ip: &str, names: &[&str]) -> HostAlias {
        HostAlias {
            ip: ip.into(),
            hostnames: Some(names.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn hostnames_come_from_spec_or_name_and_subdomain_makes_a_domain() {
        type Want = Result<(&'static str, Option<&'static str>), &'static str>;
        let table: Vec<(Pod, Want)> = vec![
            (pod("web-0", |_| {}), Ok(("web-0", None))),
            (
                pod("web-0", |s| s.hostname = Some("db".into())),
                Ok(("db", None)),
            ),
            (
                pod("web-0", |s| s.subdomain = Some("svc1".into())),
                Ok(("web-0", Some("svc1.shop.svc.cluster.local"))),
            ),
            (
                pod("web-0", |s| s.hostname = Some("Bad_Name".into())),
                Err("spec.hostname"),
            ),
            (
                pod("web-0", |s| s.subdomain = Some("-x".into())),
                Err("spec.subdomain"),
            ),
        ];
        for (p, want) in table {
            let got = pod_hostname(&p, "cluster.local");
            match (got, want) {
                (Ok(h), Ok((name, domain))) => {
                    assert_eq!(h.hostname, name);
                    assert_eq!(h.domain.as_deref(), domain);
                }
                (Err(NetworkError::InvalidPod { field, .. }), Err(f)) => assert_eq!(field, f),
                (got, want) => panic!("got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn long_pod_names_are_cut_to_63_without_a_trailing_dash_or_dot() {
        let name = format!("{}-.x", "a".repeat(61));
        let h = pod_hostname(&pod(&name, |_| {}), "cluster.local").unwrap();
        assert_eq!(h.hostname, "a".repeat(61));
        let exact = "b".repeat(63);
        assert_eq!(
            pod_hostname(&pod(&exact, |_| {}), "c").unwrap().hostname,
            exact
        );
    }

    #[test]
    fn managed_hosts_match_the_kubelets_format() {
        let names = PodHostname {
            hostname: "web-0".into(),
            domain: Some("svc1.shop.svc.cluster.local".into()),
        };
        let got = managed_hosts(
            &["10.42.1.5".into()],
            &names,
            &[
                alias("127.0.0.1", &["foo.local", "bar.local"]),
                alias("10.1.2.3", &["baz"]),
            ],
        );
        assert_eq!(
            got,
            "# Kubernetes-managed hosts file.\n\
             127.0.0.1\tlocalhost\n\
             ::1\tlocalhost ip6-localhost ip6-loopback\n\
             fe00::0\tip6-localnet\n\
             fe00::0\tip6-mcastprefix\n\
             fe00::1\tip6-allnodes\n\
             fe00::2\tip6-allrouters\n\
             10.42.1.5\tweb-0.svc1.shop.svc.cluster.local\tweb-0\n\
             \n\
             # Entries added by HostAliases.\n\
             127.0.0.1\tfoo.local\tbar.local\n\
             10.1.2.3\tbaz\n"
        );
        let plain = PodHostname {
            hostname: "web".into(),
            domain: None,
        };
        assert!(
            managed_hosts(&["10.42.1.6".into()], &plain, &[])
                .ends_with("fe00::2\tip6-allrouters\n10.42.1.6\tweb\n")
        );
    }

    #[test]
    fn host_network_pods_get_the_hosts_files_and_hostname() {
        let p = pod("web", |s| {
            s.host_network = Some(true);
            s.host_aliases = Some(vec![alias("10.1.2.3", &["baz"])]);
        });
        let files = plan_pod_files(&p, None, &host(), &ClusterDns::default()).unwrap();
        assert_eq!(files.hostname, "vm\n");
        assert_eq!(
            files.hosts,
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n127.0.0.1 vm\n\n# Entries added by HostAliases.\n10.1.2.3\tbaz\n"
        );
        // ClusterFirst on the host network means Default: no MissingClusterDNS warning.
        assert_eq!(files.resolv_conf, "nameserver 10.255.255.53\n");
        assert!(files.warnings.is_empty());
    }

    #[test]
    fn a_pod_gets_its_ip_in_hosts_and_the_host_resolver_without_cluster_dns() {
        let p = pod("web", |_| {});
        let files = plan_pod_files(
            &p,
            Some(Ipv4Addr::new(10, 42, 1, 5)),
            &host(),
            &ClusterDns::default(),
        )
        .unwrap();
        assert_eq!(files.hostname, "web\n");
        assert!(files.hosts.ends_with("10.42.1.5\tweb\n"), "{}", files.hosts);
        assert_eq!(files.resolv_conf, "nameserver 10.255.255.53\n");
        assert_eq!(files.warnings[0].reason, "MissingClusterDNS");
    }

    #[test]
    fn set_hostname_as_fqdn_uses_the_fqdn_and_refuses_one_over_64_chars() {
        let p = pod("web", |s| {
            s.subdomain = Some("svc1".into());
            s.set_hostname_as_fqdn = Some(true);
        });
        let files = plan_pod_files(&p, None, &host(), &ClusterDns::default()).unwrap();
        assert_eq!(files.hostname, "web.svc1.shop.svc.cluster.local\n");
        let long = pod(&"w".repeat(40), |s| {
            s.subdomain = Some("svc1".into());
            s.set_hostname_as_fqdn = Some(true);
        });
        assert!(plan_pod_files(&long, None, &host(), &ClusterDns::default()).is_err());
    }

    #[test]
    fn an_empty_resolver_result_copies_the_hosts_file() {
        let p = pod("web", |s| s.dns_policy = Some("Default".into()));
        let h = HostFiles {
            resolv_conf: "# nothing here\n".into(),
            ..host()
        };
        let files = plan_pod_files(&p, None, &h, &ClusterDns::default()).unwrap();
        assert_eq!(files.resolv_conf, "# nothing here\n");
    }

    #[tokio::test]
    async fn the_writer_puts_three_files_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let files = PodFiles {
            hostname: "web\n".into(),
            hosts: "h\n".into(),
            resolv_conf: "r\n".into(),
            warnings: Vec::new(),
        };
        let target = dir.path().join("pod/etc");
        let paths = write_pod_files(&target, &files).await.unwrap();
        assert_eq!(std::fs::read_to_string(&paths.hostname).unwrap(), "web\n");
        assert_eq!(std::fs::read_to_string(&paths.hosts).unwrap(), "h\n");
        assert_eq!(std::fs::read_to_string(&paths.resolv_conf).unwrap(), "r\n");
        let count = std::fs::read_dir(&target).unwrap().count();
        assert_eq!(count, 3, "no temporary files left");
    }
}
