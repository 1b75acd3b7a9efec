//! Join tokens. The cluster's (`DATA/token`, `K10<ca-hash>::node:<secret>`) joins under any
//! node name; `berth-controller token rotate` replaces its secret. Per-node tokens, shaped like
//! kubeadm's bootstrap tokens, are `K10<ca-hash>::node:<id>.<secret>` (6 and 16 characters of
//! `[a-z0-9]`): an agent uses one exactly as it uses the cluster's (it sends what follows
//! `::node:` as its bearer token), and it joins only as the node it was made for, until it
//! expires or is deleted. Their records, `DATA/join-tokens/<id>` (0600 in a 0700 directory),
//! hold the node, the times and a salted digest of the secret — never the secret.
//!
//! Nothing is cached: each join attempt reads the files, so what the CLI writes while the
//! controller runs counts from the next attempt on (joins are rare, and the rate limiter bounds
//! refused ones). Time is an input (`now`).

use super::node_name::NodeName;
use super::records::{SaltedDigest, create_whole, replace_whole, same};
use berth_shared::private_files::FileError;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The cluster token's file under the data dir.
pub const CLUSTER_TOKEN_FILE: &str = "token";
/// The directory of per-node token records under the data dir.
pub const DIR: &str = "join-tokens";
/// What separates a token's CA hash from its secret.
const SECRET_MARK: &str = "::node:";
const ID_LEN: usize = 6;
const SECRET_LEN: usize = 16;
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{0}: not a join token record")]
    Corrupt(PathBuf),
    #[error("{0:?} is not a token id (6 characters of a-z and 0-9)")]
    BadId(String),
    #[error("a time to live of {0:?} reaches past the calendar")]
    TtlTooLong(Duration),
}

impl TokenError {
    pub fn is_transient(&self) -> bool {
        false
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TokenError + '_ {
    move |source| FileError::at(path)(source).into()
}

fn is_token_text(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| ALPHABET.contains(&b))
}

fn random_text(len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// A per-node token's id: 6 characters of `[a-z0-9]`, public (listed, logged) and safe as a
/// file name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TokenId(String);

impl TokenId {
    pub fn parse(s: &str) -> Result<TokenId, TokenError> {
        if is_token_text(s, ID_LEN) {
            Ok(TokenId(s.to_string()))
        } else {
            Err(TokenError::BadId(s.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TokenId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a per-node token's record says (everything but the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeToken {
    pub id: TokenId,
    pub node: NodeName,
    pub created: Timestamp,
    /// `None`: never.
    pub expires: Option<Timestamp>,
}

impl NodeToken {
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires.is_some_and(|at| now >= at)
    }
}

/// A record on disk.
#[derive(Serialize, Deserialize)]
struct Record {
    node: String,
    created: Timestamp,
    expires: Option<Timestamp>,
    /// `sha256:<salt>:<digest>` of the secret.
    secret: String,
}

/// Whom a presented join secret lets join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The cluster's token: any node name.
    Cluster,
    /// A per-node token: its node only.
    Node(NodeToken),
}

impl Credential {
    /// How the audit log names the token: `cluster`, or the per-node token's id.
    pub fn label(&self) -> &str {
        match self {
            Credential::Cluster => "cluster",
            Credential::Node(t) => t.id.as_str(),
        }
    }
}

/// Why a presented secret lets nobody join (answered 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("invalid join token")]
    Invalid,
    /// Deleted, never made, or a wrong secret: the caller learns nothing about which.
    #[error(
        "join token \"{0}\" is not valid: it was deleted, never existed, or its secret is wrong"
    )]
    Unknown(TokenId),
    /// Said only to a caller who holds the secret.
    #[error(
        "join token \"{id}\" (for node \"{node}\") expired at {at}: an administrator can make \
         another with `berth-controller token create --node {node}`"
    )]
    Expired {
        id: TokenId,
        node: NodeName,
        at: Timestamp,
    },
}

/// The join tokens of one data dir.
#[derive(Debug, Clone)]
pub struct JoinTokens {
    data_dir: PathBuf,
}

/// `now + ttl`, rounded up to a whole second (records keep seconds; a token lasts at least its
/// TTL).
fn expiry(now: Timestamp, ttl: Duration) -> Result<Timestamp, TokenError> {
    let too_long = || TokenError::TtlTooLong(ttl);
    let ttl_signed = jiff::SignedDuration::try_from(ttl).map_err(|_| too_long())?;
    let at = now.checked_add(ttl_signed).map_err(|_| too_long())?;
    let whole = at.as_second() + i64::from(at.subsec_nanosecond() > 0);
    Timestamp::from_second(whole).map_err(|_| too_long())
}

impl JoinTokens {
    pub fn new(data_dir: &Path) -> JoinTokens {
        JoinTokens {
            data_dir: data_dir.to_path_buf(),
        }
    }

    /// The directory of per-node token records.
    pub fn dir(&self) -> PathBuf {
        self.data_dir.join(DIR)
    }

    fn record_path(&self, id: &TokenId) -> PathBuf {
        self.dir().join(id.as_str())
    }

    fn cluster_path(&self) -> PathBuf {
        self.data_dir.join(CLUSTER_TOKEN_FILE)
    }

    fn read_cluster(&self) -> Result<Option<String>, TokenError> {
        let path = self.cluster_path();
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(Some(t.trim().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }

    fn write_cluster(&self, ca_pem: &str, secret: &str) -> Result<String, TokenError> {
        let token = format!("K10{}{SECRET_MARK}{secret}", super::ca_hash(ca_pem));
        replace_whole(&self.data_dir, CLUSTER_TOKEN_FILE, &format!("{token}\n"))
            .map_err(io(&self.cluster_path()))?;
        Ok(token)
    }

    /// The cluster token, made on first start; its CA hash follows the CA.
    pub fn load_or_create_cluster(&self, ca_pem: &str) -> Result<String, TokenError> {
        let existing = self.read_cluster()?;
        let secret = match existing.as_deref().and_then(|t| t.split_once(SECRET_MARK)) {
            Some((_, s)) if !s.is_empty() => s.to_string(),
            _ => cluster_secret(),
        };
        let token = format!("K10{}{SECRET_MARK}{secret}", super::ca_hash(ca_pem));
        if existing.as_deref() == Some(token.as_str()) {
            return Ok(token);
        }
        self.write_cluster(ca_pem, &secret)
    }

    /// Replaces the cluster token's secret: the old one joins nothing from now on (nodes that
    /// joined keep their certificates). Returns the new token.
    pub fn rotate(&self, ca_pem: &str) -> Result<String, TokenError> {
        self.write_cluster(ca_pem, &cluster_secret())
    }

    /// Makes a token that joins only as `node`, expiring `ttl` after `now` (`None`: never).
    /// Returns its record and the token (the only time the secret is seen).
    pub fn create(
        &self,
        node: &NodeName,
        ttl: Option<Duration>,
        ca_pem: &str,
        now: Timestamp,
    ) -> Result<(NodeToken, String), TokenError> {
        let created = Timestamp::from_second(now.as_second()).unwrap_or(now);
        let expires = ttl.map(|ttl| expiry(now, ttl)).transpose()?;
        let secret = random_text(SECRET_LEN);
        let record = Record {
            node: node.to_string(),
            created,
            expires,
            secret: SaltedDigest::of(&secret).to_string(),
        };
        let text = serde_json::to_string(&record).unwrap_or_default() + "\n";
        loop {
            let id = TokenId(random_text(ID_LEN));
            // 36^6 ids: a collision with an existing token is rare, and then we draw again.
            if create_whole(&self.dir(), id.as_str(), &text).map_err(io(&self.record_path(&id)))? {
                let token = format!("K10{}{SECRET_MARK}{id}.{secret}", super::ca_hash(ca_pem));
                let made = NodeToken {
                    id,
                    node: node.clone(),
                    created,
                    expires,
                };
                return Ok((made, token));
            }
        }
    }

    fn read(&self, id: &TokenId) -> Result<Option<(NodeToken, SaltedDigest)>, TokenError> {
        let path = self.record_path(id);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path)(e)),
        };
        let corrupt = || TokenError::Corrupt(path.clone());
        let record: Record = serde_json::from_str(&text).map_err(|_| corrupt())?;
        let node = NodeName::parse(&record.node).map_err(|_| corrupt())?;
        let digest = SaltedDigest::parse(&record.secret).ok_or_else(corrupt)?;
        let token = NodeToken {
            id: id.clone(),
            node,
            created: record.created,
            expires: record.expires,
        };
        Ok(Some((token, digest)))
    }

    /// Every per-node token, oldest first.
    pub fn list(&self) -> Result<Vec<NodeToken>, TokenError> {
        let dir = self.dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&dir)(e)),
        };
        let mut tokens = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io(&dir))?;
            // Temporary files (`.<id>.<nonce>.tmp`) and strangers are not tokens.
            let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| TokenId::parse(n).ok())
            else {
                continue;
            };
            if let Some((token, _)) = self.read(&id)? {
                tokens.push(token);
            }
        }
        tokens.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
        Ok(tokens)
    }

    /// Removes a per-node token; `false` if there was none.
    pub fn delete(&self, id: &TokenId) -> Result<bool, TokenError> {
        let path = self.record_path(id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Whom `presented` (the bearer secret of a join request) lets join at `now`, reading the
    /// files as they are now. `Err` only when a file cannot be read.
    pub fn authenticate(
        &self,
        presented: &str,
        now: Timestamp,
    ) -> Result<Result<Credential, Refusal>, TokenError> {
        let presented = presented.trim();
        let cluster = self.read_cluster()?;
        if let Some((_, secret)) = cluster.as_deref().and_then(|t| t.split_once(SECRET_MARK))
            && !secret.is_empty()
            && same(secret.as_bytes(), presented.as_bytes())
        {
            return Ok(Ok(Credential::Cluster));
        }
        let Some((id, secret)) = presented.split_once('.') else {
            return Ok(Err(Refusal::Invalid));
        };
        let Ok(id) = TokenId::parse(id) else {
            return Ok(Err(Refusal::Invalid));
        };
        let Some((token, digest)) = self.read(&id)? else {
            return Ok(Err(Refusal::Unknown(id)));
        };
        if !digest.matches(secret) {
            return Ok(Err(Refusal::Unknown(id)));
        }
        if let Some(at) = token.expires
            && token.expired(now)
        {
            return Ok(Err(Refusal::Expired {
                id,
                node: token.node,
                at,
            }));
        }
        Ok(Ok(Credential::Node(token)))
    }
}

/// A fresh cluster secret: 128 random bits in hex.
fn cluster_secret() -> String {
    let bytes: [u8; 16] = rand::random();
    super::records::hex(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n";

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn name(s: &str) -> NodeName {
        NodeName::parse(s).unwrap()
    }

    /// The bearer secret of a token (what follows `::node:`), as the agent sends it.
    fn secret(token: &str) -> &str {
        token.split_once(SECRET_MARK).unwrap().1
    }

    #[test]
    fn the_cluster_token_pins_the_ca_and_survives_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = JoinTokens::new(dir.path());
        let t1 = tokens.load_or_create_cluster(CA).unwrap();
        let t2 = tokens.load_or_create_cluster(CA).unwrap();
        assert_eq!(t1, t2);
        assert!(t1.starts_with(&format!("K10{}::node:", super::super::ca_hash(CA))));
        assert_eq!(secret(&t1).len(), 32);
        let path = dir.path().join(CLUSTER_TOKEN_FILE);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A new CA keeps the secret and changes the hash.
        let t3 = tokens.load_or_create_cluster("another CA").unwrap();
        assert_eq!(secret(&t3), secret(&t1));
        assert_ne!(t3, t1);
    }

    #[test]
    fn rotating_the_cluster_token_retires_the_old_secret_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = JoinTokens::new(dir.path());
        let now = t("2025-01-01T00:00:00Z");
        let old = tokens.load_or_create_cluster(CA).unwrap();
        assert_eq!(
            tokens.authenticate(secret(&old), now).unwrap(),
            Ok(Credential::Cluster)
        );
        let new = tokens.rotate(CA).unwrap();
        assert_ne!(secret(&new), secret(&old));
        assert_eq!(tokens.load_or_create_cluster(CA).unwrap(), new);
        assert_eq!(
            tokens.authenticate(secret(&old), now).unwrap(),
            Err(Refusal::Invalid)
        );
        assert_eq!(
            tokens
                .authenticate(&format!(" {}\n", secret(&new)), now)
                .unwrap(),
            Ok(Credential::Cluster)
        );
    }

    #[test]
    fn a_node_token_names_its_node_and_expires_after_its_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = JoinTokens::new(dir.path());
        let now = t("2025-01-01T00:00:00.5Z");
        let (made, token) = tokens
            .create(&name("node-a"), Some(Duration::from_secs(2)), CA, now)
            .unwrap();
        // K10<hash>::node:<id>.<secret>, kubeadm's shape after the mark.
        let (id, s) = secret(&token).split_once('.').unwrap();
        assert_eq!(id, made.id.as_str());
        assert!(is_token_text(id, 6) && is_token_text(s, 16), "{token}");
        assert_eq!(made.created, t("2025-01-01T00:00:00Z"));
        // 2 s after 00.5, rounded up to the second: it lasts at least its TTL.
        assert_eq!(made.expires, Some(t("2025-01-01T00:00:03Z")));

        let at = |s: &str| tokens.authenticate(secret(&token), t(s)).unwrap();
        assert_eq!(
            at("2025-01-01T00:00:02.9Z"),
            Ok(Credential::Node(made.clone()))
        );
        assert_eq!(
            at("2025-01-01T00:00:03Z"),
            Err(Refusal::Expired {
                id: made.id.clone(),
                node: name("node-a"),
                at: t("2025-01-01T00:00:03Z"),
            })
        );
        let message = at("2025-01-02T00:00:00Z").unwrap_err().to_string();
        assert!(
            message.contains("expired at 2025-01-01T00:00:03Z"),
            "{message}"
        );
        assert_eq!(Credential::Node(made).label(), id);
        assert_eq!(Credential::Cluster.label(), "cluster");
    }

    #[test]
    fn a_token_without_a_ttl_never_expires() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = JoinTokens::new(dir.path());
        let now = t("2025-01-01T00:00:00Z");
        let (made, token) = tokens.create(&name("node-a"), None, CA, now).unwrap();
        assert_eq!(made.expires, None);
        let later = t("2125-01-01T00:00:00Z");
        assert_eq!(
            tokens.authenticate(secret(&token), later).unwrap(),
            Ok(Credential::Node(made))
        );
        assert!(matches!(
            tokens.create(&name("node-a"), Some(Duration::MAX), CA, now),
            Err(TokenError::TtlTooLong(_))
        ));
    }

    #[test]
    fn wrong_secrets_unknown_ids_and_deleted_tokens_look_alike() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = JoinTokens::new(dir.path());
        let now = t("2025-01-01T00:00:00Z");
        tokens.load_or_create_cluster(CA).unwrap();
        let (made, token) = tokens.create(&name("node-a"), None, CA, now).unwrap();
        let id = made.id.clone();
        let check = |s: &str| tokens.authenticate(s, now).unwrap();
        assert_eq!(
            check(&format!("{id}.0000000000000000")),
            Err(Refusal::Unknown(id.clone()))
        );
        assert_eq!(check(&format!("{id}.")), Err(Refusal::Unknown(id.clone())));
        assert_eq!(
            check("zzzzzz.0000000000000000"),
            Err(Refusal::Unknown(TokenId("zzzzzz".into())))
        );
        for invalid in ["", "nonsense", "../../x.y", "ABCDEF.0000000000000000", "."] {
            assert_eq!(check(invalid), Err(Refusal::Invalid), "{invalid:?}");
        }
        assert!(tokens.delete(&id).unwrap());
        assert!(!tokens.delete(&id).unwrap());
        assert_eq!(check(secret(&token)), Err(Refusal::Unknown(id)));
    }

    #[test]
    fn records_are_private_hold_no_secret_and_list_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = JoinTokens::new(dir.path());
        let (a, token_a) = tokens
            .create(&name("node-a"), None, CA, t("2025-01-01T00:00:00Z"))
            .unwrap();
        let (b, _) = tokens
            .create(
                &name("node-b"),
                Some(Duration::from_secs(3600)),
                CA,
                t("2025-01-02T00:00:00Z"),
            )
            .unwrap();
        let path = dir.path().join(DIR).join(a.id.as_str());
        let record = std::fs::read_to_string(&path).unwrap();
        let (_, s) = secret(&token_a).split_once('.').unwrap();
        assert!(!record.contains(s), "{record}");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join(DIR)), 0o700);
        // Strangers in the directory are not tokens.
        std::fs::write(dir.path().join(DIR).join(".abcdef.1.tmp"), "x").unwrap();
        assert_eq!(tokens.list().unwrap(), vec![a, b]);
        // A damaged record is an error, not a token.
        std::fs::write(&path, "garbage").unwrap();
        assert!(matches!(tokens.list(), Err(TokenError::Corrupt(_))));
    }

    #[test]
    fn ids_are_six_characters_of_a_to_z_and_digits() {
        assert!(TokenId::parse("abc123").is_ok());
        for bad in ["abc12", "abc1234", "ABC123", "abc.12", "../abc", ""] {
            assert!(TokenId::parse(bad).is_err(), "{bad}");
        }
    }
}
