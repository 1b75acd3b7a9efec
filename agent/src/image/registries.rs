//! The registries file, in the format of k3s's `registries.yaml` (pure parse and lookup).
//!
//! ```yaml
//! mirrors:
//!   docker.io:
//!     endpoint: ["http://127.0.0.1:5000", "https://mirror.example.com"]
//!   "*":
//!     endpoint: ["http://fallback:5000"]
//! configs:
//!   "127.0.0.1:5000":
//!     auth: {username: u, password: p}
//!     tls: {insecure_skip_verify: true, ca_file: /etc/ssl/ca.pem}
//! ```
//! A registry's mirror endpoints are tried in order, then the registry itself (`docker.io`
//! means `registry-1.docker.io`). A registry without its own mirror entry uses the `*`
//! entry. `configs` are looked up by the endpoint's host (then `*`). An endpoint without a
//! scheme is HTTPS; a registry on a loopback host is reached over plain HTTP unless its own
//! `configs` entry has a `tls` section.

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine;
use serde::Deserialize;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct RegistriesConfig {
    #[serde(default)]
    pub mirrors: BTreeMap<String, Mirror>,
    #[serde(default)]
    pub configs: BTreeMap<String, RegistryConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Mirror {
    #[serde(default)]
    pub endpoint: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct RegistryConfig {
    #[serde(default)]
    pub auth: Option<AuthConfig>,
    #[serde(default)]
    pub tls: Option<TlsConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct AuthConfig {
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    /// base64 of `username:password`.
    #[serde(default)]
    pub auth: Option<String>,
    /// A bearer token used as is.
    #[serde(default)]
    pub identitytoken: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct TlsConfig {
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid registries file: {0}")]
pub struct RegistriesError(pub String);

/// Credentials for one endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    Anonymous,
    Basic { username: String, password: String },
    Bearer(String),
}

/// One place to fetch a registry's content from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `host[:port]` as used in URLs.
    pub host: String,
    pub plain_http: bool,
    pub credentials: Credentials,
    pub insecure_skip_verify: bool,
    pub ca_file: Option<PathBuf>,
    /// A mirror (as opposed to the registry itself).
    pub mirror: bool,
}

/// `http://h:1/v2` → (`h:1`, plain http); `h:1` → (`h:1`, https).
fn parse_endpoint(url: &str) -> Option<(String, bool)> {
    let (plain, rest) = if let Some(r) = url.strip_prefix("http://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (false, r)
    } else {
        (false, url)
    };
    let host = rest.split('/').next().unwrap_or_default().trim();
    (!host.is_empty()).then(|| (host.to_string(), plain))
}

fn is_loopback(host: &str) -> bool {
    let name = host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host);
    name == "localhost" || name.starts_with("127.") || name == "[::1]"
}

impl RegistriesConfig {
    /// Parses the YAML text (an empty file is an empty config).
    pub fn parse(yaml: &str) -> Result<RegistriesConfig, RegistriesError> {
        if yaml.trim().is_empty() {
            return Ok(RegistriesConfig::default());
        }
        serde_saphyr::from_str(yaml).map_err(|e| RegistriesError(e.to_string()))
    }

    fn config_for(&self, host: &str, registry: &str) -> Option<&RegistryConfig> {
        self.configs
            .get(host)
            .or_else(|| self.configs.get(registry))
            .or_else(|| self.configs.get("*"))
    }

    fn credentials(config: Option<&RegistryConfig>) -> Credentials {
        let Some(auth) = config.and_then(|c| c.auth.as_ref()) else {
            return Credentials::Anonymous;
        };
        if let Some(token) = auth.identitytoken.as_ref().filter(|t| !t.is_empty()) {
            return Credentials::Bearer(token.clone());
        }
        if let (Some(u), Some(p)) = (&auth.username, &auth.password) {
            return Credentials::Basic {
                username: u.clone(),
                password: p.clone(),
            };
        }
        let decoded = auth
            .auth
            .as_ref()
            .and_then(|a| {
                base64::engine::general_purpose::STANDARD
                    .decode(a.trim())
                    .ok()
            })
            .and_then(|b| String::from_utf8(b).ok());
        match decoded.as_deref().and_then(|d| d.split_once(':')) {
            Some((u, p)) => Credentials::Basic {
                username: u.to_string(),
                password: p.to_string(),
            },
            None => Credentials::Anonymous,
        }
    }

    fn endpoint(&self, host: String, plain_http: bool, registry: &str, mirror: bool) -> Endpoint {
        let config = self.config_for(&host, registry);
        let tls = config.and_then(|c| c.tls.as_ref());
        Endpoint {
            credentials: Self::credentials(config),
            insecure_skip_verify: tls.is_some_and(|t| t.insecure_skip_verify),
            ca_file: tls.and_then(|t| t.ca_file.clone()),
            host,
            plain_http,
            mirror,
        }
    }

    /// Where to fetch `registry`'s content from, in order: its mirrors (or the `*` ones),
    /// then the registry itself.
    pub fn endpoints(&self, registry: &str) -> Vec<Endpoint> {
        let mirror = self.mirrors.get(registry).or_else(|| self.mirrors.get("*"));
        let mut out: Vec<Endpoint> = mirror
            .map(|m| m.endpoint.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|url| parse_endpoint(url))
            .map(|(host, plain)| self.endpoint(host, plain, registry, true))
            .collect();
        let upstream = if registry == "docker.io" {
            "registry-1.docker.io".to_string()
        } else {
            registry.to_string()
        };
        if !out.iter().any(|e| e.host == upstream) {
            let tls = self.configs.get(&upstream).is_some_and(|c| c.tls.is_some());
            let plain = is_loopback(&upstream) && !tls;
            out.push(self.endpoint(upstream, plain, registry, false));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
mirrors:
  docker.io:
    endpoint:
      - "http://127.0.0.1:5000"
      - "https://mirror.example.com/v2"
  "*":
    endpoint: ["mirror.any:443"]
configs:
  "127.0.0.1:5000":
    auth:
      username: alice
      password: secret
  "mirror.example.com":
    tls:
      insecure_skip_verify: true
      ca_file: /etc/ca.pem
  "registry-1.docker.io":
    auth:
      auth: Ym9iOmh1bnRlcjI=
"#;

    fn hosts(eps: &[Endpoint]) -> Vec<(&str, bool, bool)> {
        eps.iter()
            .map(|e| (e.host.as_str(), e.plain_http, e.mirror))
            .collect()
    }

    #[test]
    fn mirrors_come_first_then_the_upstream_registry() {
        let cfg = RegistriesConfig::parse(FILE).unwrap();
        let eps = cfg.endpoints("docker.io");
        assert_eq!(
            hosts(&eps),
            vec![
                ("127.0.0.1:5000", true, true),
                ("mirror.example.com", false, true),
                ("registry-1.docker.io", false, false),
            ]
        );
        assert_eq!(
            eps[0].credentials,
            Credentials::Basic {
                username: "alice".into(),
                password: "secret".into()
            }
        );
        assert!(eps[1].insecure_skip_verify);
        assert_eq!(eps[1].ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(eps[1].credentials, Credentials::Anonymous);
        assert_eq!(
            eps[2].credentials,
            Credentials::Basic {
                username: "bob".into(),
                password: "hunter2".into()
            }
        );
    }

    #[test]
    fn the_wildcard_mirror_serves_registries_without_their_own_entry() {
        let cfg = RegistriesConfig::parse(FILE).unwrap();
        assert_eq!(
            hosts(&cfg.endpoints("quay.io")),
            vec![("mirror.any:443", false, true), ("quay.io", false, false)]
        );
    }

    #[test]
    fn without_a_file_the_registry_itself_is_used() {
        let cfg = RegistriesConfig::parse("").unwrap();
        assert_eq!(
            hosts(&cfg.endpoints("docker.io")),
            vec![("registry-1.docker.io", false, false)]
        );
        assert_eq!(
            hosts(&cfg.endpoints("127.0.0.1:5000")),
            vec![("127.0.0.1:5000", true, false)]
        );
        assert_eq!(
            hosts(&cfg.endpoints("localhost:5000")),
            vec![("localhost:5000", true, false)]
        );
    }

    #[test]
    fn a_loopback_registry_with_tls_settings_is_reached_over_https() {
        let cfg = RegistriesConfig::parse(
            "configs:\n  \"127.0.0.1:5443\":\n    tls:\n      ca_file: /tmp/ca.pem\n",
        )
        .unwrap();
        let eps = cfg.endpoints("127.0.0.1:5443");
        assert_eq!(hosts(&eps), vec![("127.0.0.1:5443", false, false)]);
        assert_eq!(eps[0].ca_file, Some(PathBuf::from("/tmp/ca.pem")));
        assert_eq!(
            hosts(&cfg.endpoints("127.0.0.1:5000")),
            vec![("127.0.0.1:5000", true, false)]
        );
    }

    #[test]
    fn a_mirror_equal_to_the_registry_is_not_tried_twice() {
        let cfg = RegistriesConfig::parse(
            "mirrors:\n  \"127.0.0.1:5000\":\n    endpoint: [\"http://127.0.0.1:5000\"]\n",
        )
        .unwrap();
        assert_eq!(
            hosts(&cfg.endpoints("127.0.0.1:5000")),
            vec![("127.0.0.1:5000", true, true)]
        );
    }

    #[test]
    fn malformed_files_are_errors() {
        assert!(RegistriesConfig::parse("mirrors: [1, 2]").is_err());
    }
}
