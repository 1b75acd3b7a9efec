//! Registry credentials from a pod's image pull secrets, matched to images as the kubelet's
//! credential keyring does.
//!
//! Planner: pure, no I/O.
//!
//! A secret of type `kubernetes.io/dockerconfigjson` holds `.dockerconfigjson`
//! (`{"auths": {KEY: ENTRY}}`); one of type `kubernetes.io/dockercfg` holds `.dockercfg` (the
//! same map without `auths`). An ENTRY is `{"auth": base64("user:pass")}` or
//! `{"username", "password"}`, or a token (`identitytoken`/`registrytoken`, sent as a bearer).
//!
//! A KEY is a schemeless or `http(s)://` URL, `host[:port][/path]`; a `/v1/` or `/v2/` path is
//! the registry itself (`https://index.docker.io/v1/` is Docker Hub). Host labels may be globs
//! (`*.example.com`, `registry.*`): each `*` stands for one label or part of one. A key matches
//! an image `registry/repository` when the ports are equal, the hosts have as many labels and
//! each matches, and the key's path is a prefix of the repository's path. Every matching key's
//! credentials are returned, the keys in reverse lexical order (so `quay.io/team` comes before
//! `quay.io`), each key's credentials in the order of the secrets; the puller tries them in turn.
//! Docker Hub's aliases (`index.docker.io`, `registry-1.docker.io`) are `docker.io`, the name
//! images normalise to.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use serde::Deserialize;
use sha2::Digest as _;

/// `Secret.type` of a `.dockerconfigjson` secret.
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
/// `Secret.type` of a legacy `.dockercfg` secret.
pub const DOCKER_CFG: &str = "kubernetes.io/dockercfg";
const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
const DOCKER_CFG_KEY: &str = ".dockercfg";

/// One set of credentials for a registry.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    Basic {
        username: String,
        password: String,
    },
    /// A bearer token sent as is.
    Token(String),
}

impl fmt::Debug for Credential {
    // Never print a password or token (logs, test failures).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Basic { username, .. } => write!(f, "Basic({username}, …)"),
            Credential::Token(_) => write!(f, "Token(…)"),
        }
    }
}

impl Credential {
    /// A stable fingerprint (32 hex digits of a SHA-256) recorded on images pulled with these
    /// credentials; the secret itself is never written to the node.
    pub fn fingerprint(&self) -> String {
        let mut h = sha2::Sha256::new();
        match self {
            Credential::Basic { username, password } => {
                h.update(b"basic\0");
                h.update(username.as_bytes());
                h.update(b"\0");
                h.update(password.as_bytes());
            }
            Credential::Token(t) => {
                h.update(b"token\0");
                h.update(t.as_bytes());
            }
        }
        h.finalize()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Why a pull secret cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("pull secret {secret:?} of type {kind:?} has no {key:?} data")]
    MissingData {
        secret: String,
        kind: String,
        key: &'static str,
    },
    #[error("pull secret {secret:?}: {reason}")]
    Malformed { secret: String, reason: String },
}

impl KeyringError {
    /// Never: the secret has to change first.
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// One `auths` entry as Docker writes it.
#[derive(Debug, Default, Deserialize)]
struct Entry {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

impl Entry {
    fn credential(self, secret: &str, key: &str) -> Result<Option<Credential>, KeyringError> {
        let token = self
            .registrytoken
            .filter(|t| !t.is_empty())
            .or(self.identitytoken.filter(|t| !t.is_empty()));
        if let Some(t) = token {
            return Ok(Some(Credential::Token(t)));
        }
        if let Some(auth) = self.auth.filter(|a| !a.is_empty()) {
            let malformed = |reason: &str| KeyringError::Malformed {
                secret: secret.to_string(),
                reason: format!("auth of {key:?}: {reason}"),
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|_| malformed("not base64"))?;
            let text = String::from_utf8(bytes).map_err(|_| malformed("not UTF-8"))?;
            let (u, p) = text
                .split_once(':')
                .ok_or_else(|| malformed("not username:password"))?;
            return Ok(Some(Credential::Basic {
                username: u.to_string(),
                password: p.to_string(),
            }));
        }
        Ok(match (self.username, self.password) {
            (Some(username), Some(password)) if !username.is_empty() => {
                Some(Credential::Basic { username, password })
            }
            _ => None,
        })
    }
}

/// The `(key, credential)` pairs of one pull secret. Secrets of other types give none, as the
/// kubelet ignores them.
pub fn parse_secret(
    name: &str,
    kind: &str,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<(String, Credential)>, KeyringError> {
    let (key, wrapped) = match kind {
        DOCKER_CONFIG_JSON => (DOCKER_CONFIG_JSON_KEY, true),
        DOCKER_CFG => (DOCKER_CFG_KEY, false),
        _ => return Ok(Vec::new()),
    };
    let bytes =
        data.get(key)
            .filter(|b| !b.is_empty())
            .ok_or_else(|| KeyringError::MissingData {
                secret: name.to_string(),
                kind: kind.to_string(),
                key,
            })?;
    let malformed = |e: serde_json::Error| KeyringError::Malformed {
        secret: name.to_string(),
        reason: format!("{key}: {e}"),
    };
    let auths = if wrapped {
        serde_json::from_slice::<ConfigJson>(bytes)
            .map_err(malformed)?
            .auths
    } else {
        serde_json::from_slice::<BTreeMap<String, Entry>>(bytes).map_err(malformed)?
    };
    let mut out = Vec::new();
    for (registry, entry) in auths {
        if let Some(c) = entry.credential(name, &registry)? {
            out.push((registry, c));
        }
    }
    Ok(out)
}

/// A URL without its scheme: `host[:port]` split into labels and port, and the path.
#[derive(Debug, PartialEq, Eq)]
struct Location {
    labels: Vec<String>,
    port: Option<String>,
    path: String,
}

fn docker_hub(host: &str) -> bool {
    matches!(host, "index.docker.io" | "registry-1.docker.io")
}

fn parse_location(url: &str) -> Option<Location> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => (h, Some(p)),
            _ => (hostport, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let host = if docker_hub(&host) {
        "docker.io".to_string()
    } else {
        host
    };
    Some(Location {
        labels: host.split('.').map(str::to_string).collect(),
        port: port.map(str::to_string),
        path: path.to_string(),
    })
}

/// The index key of a configured URL: `/v1/…` and `/v2/…` paths lose their version, a bare
/// `/` is the host alone.
fn normalise_key(url: &str) -> Option<String> {
    let loc = parse_location(url)?;
    let mut path = loc.path.as_str();
    if path.starts_with("/v1/") || path.starts_with("/v2/") {
        path = &path[3..];
    }
    let host = loc.labels.join(".");
    let hostport = match &loc.port {
        Some(p) if host.contains(':') => format!("[{host}]:{p}"),
        Some(p) => format!("{host}:{p}"),
        None => host,
    };
    Some(if path.is_empty() || path == "/" {
        hostport
    } else {
        format!("{hostport}{path}")
    })
}

/// `*` any run of characters, `?` one character (within one host label).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob(rest, &text[i..])),
        Some((b'?', rest)) => !text.is_empty() && glob(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob(rest, &text[1..]),
    }
}

/// Whether the configured key `key` covers `image` (`registry/repository`).
pub fn key_matches(key: &str, image: &str) -> bool {
    let (Some(k), Some(t)) = (parse_location(key), parse_location(image)) else {
        return false;
    };
    k.port == t.port
        && k.labels.len() == t.labels.len()
        && t.path.starts_with(&k.path)
        && k.labels
            .iter()
            .zip(&t.labels)
            .all(|(p, l)| glob(p.as_bytes(), l.as_bytes()))
}

/// The credentials of a pod's pull secrets, by registry key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keyring {
    /// Keys in lookup order (reverse lexical), each with its credentials in secret order.
    entries: Vec<(String, Vec<Credential>)>,
}

impl Keyring {
    /// Builds a keyring from `(key, credential)` pairs in the order of the pod's secrets.
    pub fn new(pairs: impl IntoIterator<Item = (String, Credential)>) -> Keyring {
        let mut by_key: BTreeMap<String, Vec<Credential>> = BTreeMap::new();
        for (key, cred) in pairs {
            let Some(key) = normalise_key(&key) else {
                continue;
            };
            let creds = by_key.entry(key).or_default();
            if !creds.contains(&cred) {
                creds.push(cred);
            }
        }
        Keyring {
            entries: by_key.into_iter().rev().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every credential whose key covers `image` (`registry/repository`, e.g.
    /// `docker.io/library/nginx`), most specific key first; none for an anonymous pull.
    pub fn lookup(&self, image: &str) -> Vec<Credential> {
        let mut out: Vec<Credential> = Vec::new();
        for (key, creds) in &self.entries {
            if key_matches(key, image) {
                for c in creds {
                    if !out.contains(c) {
                        out.push(c.clone());
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(u: &str, p: &str) -> Credential {
        Credential::Basic {
            username: u.into(),
            password: p.into(),
        }
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn data(key: &str, value: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([(key.to_string(), value.as_bytes().to_vec())])
    }

    #[test]
    fn keys_match_images_as_the_kubelets_keyring_does() {
        for (key, image, want) in [
            (
                "registry.example.com",
                "registry.example.com/team/app",
                true,
            ),
            (
                "https://registry.example.com",
                "registry.example.com/app",
                true,
            ),
            (
                "http://registry.example.com/v2/",
                "registry.example.com/app",
                true,
            ),
            (
                "registry.example.com/team",
                "registry.example.com/team/app",
                true,
            ),
            (
                "registry.example.com/team",
                "registry.example.com/other/app",
                false,
            ),
            (
                "registry.example.com:5000",
                "registry.example.com:5000/app",
                true,
            ),
            (
                "registry.example.com:5000",
                "registry.example.com/app",
                false,
            ),
            (
                "registry.example.com",
                "registry.example.com:5000/app",
                false,
            ),
            ("*.example.com", "registry.example.com/app", true),
            ("*.example.com", "example.com/app", false),
            ("*.example.com", "a.b.example.com/app", false),
            ("registry.*", "registry.io/app", true),
            ("reg*.example.com", "registry.example.com/app", true),
            ("reg*.example.com", "quay.example.com/app", false),
            ("other.example.com", "registry.example.com/app", false),
            ("127.0.0.1:5000", "127.0.0.1:5000/private/busybox", true),
            (
                "https://index.docker.io/v1/",
                "docker.io/library/nginx",
                true,
            ),
            ("registry-1.docker.io", "docker.io/library/nginx", true),
            ("docker.io/library", "docker.io/library/nginx", true),
            ("docker.io/someone", "docker.io/library/nginx", false),
            ("[::1]:5000", "[::1]:5000/app", true),
        ] {
            let key = normalise_key(key).unwrap_or_default();
            assert_eq!(key_matches(&key, image), want, "{key} vs {image}");
        }
    }

    #[test]
    fn the_longest_path_comes_first_and_every_match_is_returned_in_secret_order() {
        let ring = Keyring::new([
            ("quay.io".to_string(), basic("host", "1")),
            ("quay.io/team".to_string(), basic("team", "2")),
            ("quay.io".to_string(), basic("host2", "3")),
            ("*.io".to_string(), basic("glob", "4")),
            ("gcr.io".to_string(), basic("gcr", "5")),
        ]);
        assert_eq!(
            ring.lookup("quay.io/team/app"),
            vec![
                basic("team", "2"),
                basic("host", "1"),
                basic("host2", "3"),
                basic("glob", "4")
            ]
        );
        assert_eq!(
            ring.lookup("quay.io/other/app"),
            vec![basic("host", "1"), basic("host2", "3"), basic("glob", "4")]
        );
        assert_eq!(ring.lookup("registry.example.com/app"), vec![]);
    }

    #[test]
    fn the_same_credentials_under_two_keys_are_tried_once() {
        let ring = Keyring::new([
            ("quay.io/team".to_string(), basic("u", "p")),
            ("quay.io".to_string(), basic("u", "p")),
        ]);
        assert_eq!(ring.lookup("quay.io/team/app"), vec![basic("u", "p")]);
    }

    #[test]
    fn a_dockerconfigjson_secret_gives_each_auths_entry() {
        let json = format!(
            r#"{{"auths": {{
                "a.example.com": {{"auth": "{}"}},
                "b.example.com:5000/team": {{"username": "bob", "password": "pw", "email": "b@x"}},
                "c.example.com": {{"identitytoken": "tok"}},
                "d.example.com": {{"email": "nobody@x"}}
            }}}}"#,
            b64("alice:s3:cret")
        );
        let got = parse_secret(
            "pull",
            DOCKER_CONFIG_JSON,
            &data(".dockerconfigjson", &json),
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                ("a.example.com".to_string(), basic("alice", "s3:cret")),
                ("b.example.com:5000/team".to_string(), basic("bob", "pw")),
                ("c.example.com".to_string(), Credential::Token("tok".into())),
            ]
        );
    }

    #[test]
    fn a_dockercfg_secret_is_the_map_without_auths() {
        let json = format!(
            r#"{{"https://index.docker.io/v1/": {{"auth": "{}"}}}}"#,
            b64("u:p")
        );
        let got = parse_secret("old", DOCKER_CFG, &data(".dockercfg", &json)).unwrap();
        assert_eq!(
            got,
            vec![("https://index.docker.io/v1/".to_string(), basic("u", "p"))]
        );
        let ring = Keyring::new(got);
        assert_eq!(
            ring.lookup("docker.io/library/nginx"),
            vec![basic("u", "p")]
        );
    }

    #[test]
    fn other_secret_types_give_no_credentials() {
        let got = parse_secret("x", "Opaque", &data(".dockerconfigjson", "{}")).unwrap();
        assert!(got.is_empty());
    }

    #[test]
    fn broken_secrets_are_errors_naming_the_secret() {
        for (kind, d, want) in [
            (
                DOCKER_CONFIG_JSON,
                data(".dockercfg", "{}"),
                "no \".dockerconfigjson\"",
            ),
            (
                DOCKER_CONFIG_JSON,
                data(".dockerconfigjson", "{"),
                "\"pull\"",
            ),
            (
                DOCKER_CONFIG_JSON,
                data(".dockerconfigjson", r#"{"auths":{"r":{"auth":"!!"}}}"#),
                "not base64",
            ),
            (
                DOCKER_CFG,
                data(
                    ".dockercfg",
                    &format!(r#"{{"r":{{"auth":"{}"}}}}"#, b64("nocolon")),
                ),
                "not username:password",
            ),
        ] {
            let e = parse_secret("pull", kind, &d).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn fingerprints_tell_credentials_apart_and_hide_them() {
        let a = basic("u", "p").fingerprint();
        assert_eq!(a.len(), 32);
        assert_eq!(a, basic("u", "p").fingerprint());
        assert_ne!(a, basic("u", "q").fingerprint());
        assert_ne!(a, Credential::Token("u\0p".into()).fingerprint());
        assert!(!format!("{:?}", basic("u", "hunter2")).contains("hunter2"));
    }
}
