//! The cluster's certificates: at first start a CA, a serving certificate and an admin client
//! certificate (O=system:masters) are created under `<data-dir>/pki`; later starts reuse them
//! (re-issuing the serving certificate when the wanted SANs change). The directory is 0700 and
//! every file in it 0600. Also writes kubeconfigs.

use base64::Engine;
use berth_shared::private_files::FileError;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("certificate generation: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("invalid TLS SAN {0:?}")]
    San(String),
    #[error(transparent)]
    Sign(#[from] crate::certificates::signer::SignError),
}

impl PkiError {
    pub fn is_transient(&self) -> bool {
        false
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PkiError + '_ {
    move |source| FileError::at(path)(source).into()
}

/// PEM material of the cluster.
#[derive(Debug, Clone)]
pub struct Pki {
    pub dir: PathBuf,
    pub ca_cert: String,
    pub server_cert: String,
    pub server_key: String,
    pub admin_cert: String,
    pub admin_key: String,
    /// The controller's identity towards agents (logs, exec): O=system:masters.
    pub agent_client_cert: String,
    pub agent_client_key: String,
    /// API aggregation's CA: aggregated API servers trust the request headers of a client
    /// certificate it signed (`requestheader-client-ca-file`).
    pub front_proxy_ca_cert: String,
    /// The certificate aggregated requests are sent with (CN `front-proxy-client`).
    pub front_proxy_client_cert: String,
    pub front_proxy_client_key: String,
}

/// The front proxy client certificate's common name (`requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// The CA `<stem>.crt`/`<stem>.key` under `dir`, created (CN `cn`, ten years) when missing.
fn load_or_create_ca(dir: &Path, stem: &str, cn: &str) -> Result<(String, String), PkiError> {
    let cert_path = dir.join(format!("{stem}.crt"));
    let key_path = dir.join(format!("{stem}.key"));
    if let (Some(c), Some(k)) = (read(&cert_path)?, read(&key_path)?) {
        return Ok((c, k));
    }
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, 10);
    let cert = params.self_signed(&key)?;
    write_private(&key_path, &key.serialize_pem())?;
    write_private(&cert_path, &cert.pem())?;
    Ok((cert.pem(), key.serialize_pem()))
}

impl Pki {
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
}

pub fn set_validity(params: &mut CertificateParams, years: i32) {
    let now = jiff::Zoned::now();
    // A day of slack before now tolerates small clock differences between hosts.
    let start = now.saturating_sub(jiff::Span::new().days(1));
    params.not_before =
        rcgen::date_time_ymd(start.year().into(), start.month() as u8, start.day() as u8);
    params.not_after = rcgen::date_time_ymd(
        i32::from(now.year()) + years,
        now.month() as u8,
        now.day().min(28) as u8,
    );
}

pub(crate) fn write_private(path: &Path, contents: &str) -> Result<(), PkiError> {
    berth_shared::private_files::write_atomic(path, contents.as_bytes())
        .map_err(|(path, source)| FileError { path, source }.into())
}

fn read(path: &Path) -> Result<Option<String>, PkiError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

fn san(name: &str) -> Result<SanType, PkiError> {
    if let Ok(ip) = name.parse::<std::net::IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    Ok(SanType::DnsName(
        name.try_into()
            .map_err(|_| PkiError::San(name.to_string()))?,
    ))
}

/// The addresses of this host's interfaces (for the serving certificate's SANs).
pub fn host_addresses() -> Vec<String> {
    let mut out = BTreeSet::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            if let Some(sa) = a.address {
                if let Some(v4) = sa.as_sockaddr_in() {
                    out.insert(v4.ip().to_string());
                } else if let Some(v6) = sa.as_sockaddr_in6() {
                    let ip = v6.ip();
                    // Link-local addresses need a scope and are useless in a certificate.
                    if (ip.segments()[0] & 0xffc0) != 0xfe80 {
                        out.insert(ip.to_string());
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

/// Loads the PKI under `dir`, creating what is missing, certificates valid for the default
/// `--certificate-validity`. The serving certificate names the fixed local names and
/// `extra_sans` only: a caller that wants the host's addresses in it passes
/// [`host_addresses`] (the controller does), so the outcome does not depend on which
/// interfaces come and go meanwhile.
pub fn load_or_create(dir: &Path, extra_sans: &[String]) -> Result<Pki, PkiError> {
    load_or_create_valid(
        dir,
        extra_sans,
        crate::certificates::serving::DEFAULT_VALIDITY,
    )
}

/// Whether a certificate (PEM) is past 70% of its life, expired or unreadable: it is issued
/// again at start.
fn stale(cert_pem: &str) -> bool {
    match crate::certificates::signer::validity(cert_pem) {
        Some((from, to)) => {
            crate::certificates::rotation::past(from, to, jiff::Timestamp::now(), 0.7)
        }
        None => true,
    }
}

/// Loads the PKI under `dir`, creating what is missing; new leaf certificates (serving,
/// admin, the controller's client certificate towards agents) are valid for `validity`, and
/// the client certificates are issued again when past 70% of their life.
pub fn load_or_create_valid(
    dir: &Path,
    extra_sans: &[String],
    validity: std::time::Duration,
) -> Result<Pki, PkiError> {
    berth_shared::private_files::ensure_dir(dir).map_err(io(dir))?;
    let (ca_cert, ca_key) = load_or_create_ca(dir, "ca", "berth-ca")?;
    let ca_keypair = KeyPair::from_pem(&ca_key)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_cert, ca_keypair)?;

    let mut sans: BTreeSet<String> = [
        "localhost",
        "127.0.0.1",
        "::1",
        "kubernetes",
        "kubernetes.default",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sans.extend(extra_sans.iter().cloned());
    let sans_path = dir.join("server.sans");
    let wanted = sans.iter().cloned().collect::<Vec<_>>().join(",");
    let server_cert_path = dir.join("server.crt");
    let server_key_path = dir.join("server.key");
    let (server_cert, server_key) = match (
        read(&server_cert_path)?,
        read(&server_key_path)?,
        read(&sans_path)?,
    ) {
        (Some(c), Some(k), Some(s)) if s == wanted => (c, k),
        _ => {
            let (cert, key) = issue_serving_cert(&issuer, &sans, validity)?;
            write_private(&server_key_path, &key)?;
            write_private(&server_cert_path, &cert)?;
            write_private(&sans_path, &wanted)?;
            (cert, key)
        }
    };

    let admin_cert_path = dir.join("admin.crt");
    let admin_key_path = dir.join("admin.key");
    let (admin_cert, admin_key) = match (read(&admin_cert_path)?, read(&admin_key_path)?) {
        (Some(c), Some(k)) if !stale(&c) => (c, k),
        _ => {
            let (c, k) = issue_client_cert(&issuer, "admin", &["system:masters"], validity)?;
            write_private(&admin_key_path, &k)?;
            write_private(&admin_cert_path, &c)?;
            (c, k)
        }
    };
    let agent_cert_path = dir.join("agent-client.crt");
    let agent_key_path = dir.join("agent-client.key");
    let (agent_client_cert, agent_client_key) =
        match (read(&agent_cert_path)?, read(&agent_key_path)?) {
            (Some(c), Some(k)) if !stale(&c) => (c, k),
            _ => {
                // Not `validity`: agents' connections take this certificate once, at start
                // (renewed at a start past 70% of its year).
                let (c, k) = issue_client_cert(
                    &issuer,
                    "berth-controller",
                    &["system:masters"],
                    crate::certificates::serving::DEFAULT_VALIDITY,
                )?;
                write_private(&agent_key_path, &k)?;
                write_private(&agent_cert_path, &c)?;
                (c, k)
            }
        };
    // API aggregation's own CA, apart from the cluster's as upstream keeps it: a server that
    // trusts it for the front proxy's headers trusts no cluster client certificate for them.
    let (front_proxy_ca_cert, front_proxy_ca_key) =
        load_or_create_ca(dir, "front-proxy-ca", "front-proxy-ca")?;
    let front_proxy_issuer = Issuer::from_ca_cert_pem(
        &front_proxy_ca_cert,
        KeyPair::from_pem(&front_proxy_ca_key)?,
    )?;
    let front_cert_path = dir.join("front-proxy-client.crt");
    let front_key_path = dir.join("front-proxy-client.key");
    let (front_proxy_client_cert, front_proxy_client_key) =
        match (read(&front_cert_path)?, read(&front_key_path)?) {
            (Some(c), Some(k)) if !stale(&c) => (c, k),
            _ => {
                let (c, k) = issue_client_cert(
                    &front_proxy_issuer,
                    FRONT_PROXY_CLIENT,
                    &[],
                    crate::certificates::serving::DEFAULT_VALIDITY,
                )?;
                write_private(&front_key_path, &k)?;
                write_private(&front_cert_path, &c)?;
                (c, k)
            }
        };
    Ok(Pki {
        front_proxy_ca_cert,
        front_proxy_client_cert,
        front_proxy_client_key,
        agent_client_cert,
        agent_client_key,
        dir: dir.to_path_buf(),
        ca_cert,
        server_cert,
        server_key,
        admin_cert,
        admin_key,
    })
}

/// Issues the serving certificate (CN berth-controller, the SANs given) signed by the CA;
/// returns (cert, key) PEM.
pub fn issue_serving_cert(
    issuer: &Issuer<'_, KeyPair>,
    sans: &BTreeSet<String>,
    validity: std::time::Duration,
) -> Result<(String, String), PkiError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "berth-controller");
    params.distinguished_name = dn;
    params.subject_alt_names = sans.iter().map(|s| san(s)).collect::<Result<_, _>>()?;
    sign_leaf(
        params,
        key,
        ExtendedKeyUsagePurpose::ServerAuth,
        validity,
        issuer,
    )
}

/// Signs `key`'s leaf certificate for one `usage` (with upstream's key usages: digital signature
/// and key encipherment), valid from now for `validity`; returns (cert, key) PEM.
fn sign_leaf(
    mut params: CertificateParams,
    key: KeyPair,
    usage: ExtendedKeyUsagePurpose,
    validity: std::time::Duration,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<(String, String), PkiError> {
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    set_lifetime(&mut params, validity)?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A leaf certificate's validity: from now (slightly backdated) for `validity`, a random
/// serial.
fn set_lifetime(
    params: &mut CertificateParams,
    validity: std::time::Duration,
) -> Result<(), PkiError> {
    crate::certificates::signer::set_lifetime(params, jiff::Timestamp::now(), validity, None)?;
    Ok(())
}

/// Issues a client certificate (CN = user, O = groups) signed by the CA; returns (cert, key) PEM.
pub fn issue_client_cert(
    issuer: &Issuer<'_, KeyPair>,
    user: &str,
    groups: &[&str],
    validity: std::time::Duration,
) -> Result<(String, String), PkiError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, user);
    for g in groups {
        dn.push(DnType::OrganizationName, *g);
    }
    params.distinguished_name = dn;
    sign_leaf(
        params,
        key,
        ExtendedKeyUsagePurpose::ClientAuth,
        validity,
        issuer,
    )
}

/// Writes a kubeconfig (mode 0600) for `server` with the CA and a client certificate embedded.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
    user: &str,
) -> Result<(), PkiError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let doc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: berth\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: berth\n  context:\n    cluster: berth\n    user: {user}\n    namespace: default\ncurrent-context: berth\npreferences: {{}}\n",
        ca = b64(ca_pem),
        cert = b64(cert_pem),
        key = b64(key_pem),
    );
    write_private(path, &doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn first_start_creates_everything_and_later_starts_reuse_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path(), &[]).unwrap();
        let b = load_or_create(dir.path(), &[]).unwrap();
        assert_eq!(a.ca_cert, b.ca_cert);
        assert_eq!(a.server_cert, b.server_cert);
        assert_eq!(a.admin_cert, b.admin_cert);
        let mode = std::fs::metadata(dir.path().join("ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    #[test]
    fn a_new_san_reissues_the_serving_certificate_only() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path(), &[]).unwrap();
        let b = load_or_create(dir.path(), &["berth.example".to_string()]).unwrap();
        assert_eq!(a.ca_cert, b.ca_cert);
        assert_ne!(a.server_cert, b.server_cert);
    }

    #[test]
    fn kubeconfig_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = load_or_create(dir.path(), &[]).unwrap();
        let path = dir.path().join("admin.kubeconfig");
        write_kubeconfig(
            &path,
            "https://127.0.0.1:1",
            &p.ca_cert,
            &p.admin_cert,
            &p.admin_key,
            "admin",
        )
        .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
