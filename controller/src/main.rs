//! `berth-controller`: parses flags and runs the control plane.

use anyhow::Context;
use berth_apiserver::api::listener::{ConnectionLimits, Timeouts};
use berth_apiserver::join::addresses::IpRange;
use berth_apiserver::join::node_name::NodeName;
use berth_apiserver::join::passwords::NodePasswords;
use berth_apiserver::join::tokens::{JoinTokens, TokenId};
use berth_controller::server::{self, Config};
use berth_shared::admission::pod_security::{self, Level, Version};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

// jemalloc hands freed memory back to the system (its background threads purge); glibc's
// per-thread arenas kept hundreds of MB of it (heap 176 MB, RSS 450 MB with 20,000 pods), and
// mimalloc's per-thread heaps grew by ~100 MB during a burst of requests. The
// `system-allocator` feature leaves glibc's malloc in place, so that a heap profiler that
// intercepts malloc (heaptrack) sees every allocation.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "berth-controller", version, about = "Berth's control plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log verbosity, as the kubelet's `-v`: 0–1 info, 2–3 debug, 4 and up trace. `BERTH_LOG`
    /// or `RUST_LOG` (tracing filter directives) win over it.
    #[arg(long = "v", global = true, default_value_t = 0)]
    v: u8,
    /// Log lines as text, or as one JSON object each.
    #[arg(long, global = true, default_value = "text", value_parser = berth_shared::logging::FORMATS)]
    log_format: String,
}

#[derive(Subcommand)]
enum Command {
    /// Print the cluster's join token agents use (`--token`), creating it if needed; or make,
    /// list and delete per-node join tokens, or rotate the cluster's.
    Token {
        #[command(subcommand)]
        command: Option<TokenCommand>,
        #[arg(long, global = true, default_value = "/var/lib/berth/controller")]
        data_dir: PathBuf,
    },
    /// Manage the identities of nodes.
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Serve the Kubernetes API and run the controllers.
    Serve(Box<ServeArgs>),
    /// Manage the controller's own certificates.
    Certificate {
        #[command(subcommand)]
        command: CertificateCommand,
    },
    /// Back up or restore the embedded store (every object with its uid and resourceVersion;
    /// not the PKI or the join token: copy DATA_DIR/pki and DATA_DIR/token beside the file).
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
}

#[derive(Subcommand)]
enum CertificateCommand {
    /// Issue new admin credentials (DATA_DIR/pki/admin.{crt,key} and the admin kubeconfig)
    /// and a new serving certificate (DATA_DIR/pki/server.{crt,key}). A running controller
    /// serves the new certificate to new connections within 5 s (it watches the files).
    Renew {
        #[arg(long, default_value = "/var/lib/berth/controller")]
        data_dir: PathBuf,
        /// The kubeconfig to rewrite (default: DATA_DIR/admin.kubeconfig).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// How long the new certificates are valid.
        #[arg(long, default_value = "8760h", value_parser = server::parse_duration)]
        certificate_validity: Duration,
    },
}

/// `certificate renew`: the admin credentials and the serving certificate, issued again.
fn renew_certificates(
    data_dir: &Path,
    kubeconfig: Option<PathBuf>,
    validity: Duration,
) -> anyhow::Result<()> {
    use berth_apiserver::certificates::{serving, signer};
    let kubeconfig = kubeconfig.unwrap_or_else(|| data_dir.join("admin.kubeconfig"));
    let server = std::fs::read_to_string(data_dir.join("listen-address"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "https://127.0.0.1:6443".to_string());
    let admin = serving::renew_admin(data_dir, &kubeconfig, &server, validity)
        .context("issuing the admin certificate")?;
    let (cert, _) = serving::renew_serving_files(&data_dir.join("pki"), validity)
        .context("issuing the serving certificate")?;
    let until = |pem: &str| signer::not_after(pem).map_or_else(String::new, |t| t.to_string());
    println!(
        "admin certificate {} (until {}) written to {}",
        signer::serial(&admin).unwrap_or_default(),
        until(&admin),
        kubeconfig.display()
    );
    println!(
        "serving certificate {} (until {}) written to {}",
        signer::serial(&cert).unwrap_or_default(),
        until(&cert),
        data_dir.join("pki").join("server.crt").display()
    );
    Ok(())
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Write every object of the store, at one revision, to FILE (mode 0600). While a
    /// controller serves on DATA_DIR it is asked over its API (with DATA_DIR's admin
    /// certificate); otherwise the store file is read directly.
    Save {
        #[arg(long, default_value = "/var/lib/berth/controller")]
        data_dir: PathBuf,
        file: PathBuf,
        /// Save the etcd store instead, read straight from etcd at one revision.
        #[command(flatten)]
        datastore: DatastoreArgs,
    },
    /// Create DATA_DIR/store.redb from FILE. DATA_DIR must hold no store (it is made if
    /// missing); start the controller on it afterwards.
    Restore {
        #[arg(long, default_value = "/var/lib/berth/controller")]
        data_dir: PathBuf,
        file: PathBuf,
        /// Restore into etcd instead (its prefix must hold no key).
        #[command(flatten)]
        datastore: DatastoreArgs,
    },
}

fn snapshot(command: SnapshotCommand) -> anyhow::Result<()> {
    use berth_controller::backup;
    match command {
        SnapshotCommand::Save {
            data_dir,
            file,
            datastore,
        } => {
            let saved = match datastore.etcd() {
                Some(etcd) => backup::save_etcd(&etcd, &file),
                None => {
                    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
                    runtime.block_on(backup::save(&data_dir, &file))
                }
            }
            .context("saving the snapshot")?;
            let from = match saved.source {
                backup::Source::File => "the store file (no controller running)",
                backup::Source::Controller => "the running controller",
                backup::Source::Etcd => "etcd",
            };
            println!(
                "snapshot of revision {} ({} objects) from {from} written to {}",
                saved.revision,
                saved.objects,
                file.display()
            );
        }
        SnapshotCommand::Restore {
            file, datastore, ..
        } if !datastore.datastore_endpoint.is_empty() => {
            let Some(etcd) = datastore.etcd() else {
                anyhow::bail!("no etcd endpoint");
            };
            let (restored, revision) =
                backup::restore_etcd(&etcd, &file).context("restoring the snapshot into etcd")?;
            println!(
                "restored {} objects (snapshot revision {}) into etcd under {} (now at revision {revision})",
                restored.objects.len(),
                restored.revision,
                etcd.prefix
            );
        }
        SnapshotCommand::Restore { data_dir, file, .. } => {
            let restored = backup::restore(&data_dir, &file).context("restoring the snapshot")?;
            println!(
                "restored revision {} ({} objects) into {}",
                restored.revision,
                restored.objects.len(),
                backup::store_file(&data_dir).display()
            );
            if !data_dir.join("pki").join("ca.crt").exists() {
                eprintln!(
                    "{} has no pki/: copy the backed-up pki/ and token there before starting                      the controller, or it makes a new CA (agents and kubeconfigs of the old                      cluster would not trust it)",
                    data_dir.display()
                );
            }
        }
    }
    Ok(())
}

/// Where the cluster state lives when it is not the embedded store (k3s's flag names).
#[derive(clap::Args)]
struct DatastoreArgs {
    /// Keep the cluster state in etcd instead of the embedded store: `http://` or `https://`
    /// member URLs, comma-separated (several controllers on one etcd serve one cluster).
    #[arg(long, value_delimiter = ',')]
    datastore_endpoint: Vec<String>,
    /// CA certificate (PEM) that signed etcd's serving certificates.
    #[arg(long)]
    datastore_cafile: Option<PathBuf>,
    /// Client certificate (PEM) for etcd.
    #[arg(long)]
    datastore_certfile: Option<PathBuf>,
    /// Client key (PEM) for etcd.
    #[arg(long)]
    datastore_keyfile: Option<PathBuf>,
    /// The key prefix of the cluster's objects in etcd.
    #[arg(long, default_value = "/berth")]
    datastore_prefix: String,
}

impl DatastoreArgs {
    /// The etcd to use, if any.
    fn etcd(self) -> Option<berth_store::EtcdConfig> {
        if self.datastore_endpoint.is_empty() {
            return None;
        }
        let mut etcd = berth_store::EtcdConfig::new(self.datastore_endpoint);
        etcd.ca_file = self.datastore_cafile;
        etcd.cert_file = self.datastore_certfile;
        etcd.key_file = self.datastore_keyfile;
        etcd.prefix = self.datastore_prefix;
        Some(etcd)
    }
}

/// The flags of `serve` (boxed in [`Command`]: they outweigh the other subcommand's many times).
#[derive(clap::Args)]
struct ServeArgs {
    /// Where the store, PKI and kubeconfig live.
    #[arg(long, default_value = "/var/lib/berth/controller")]
    data_dir: PathBuf,
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    #[arg(long, default_value = "0.0.0.0:6443")]
    listen: SocketAddr,
    /// Where to write the admin kubeconfig (default: DATA_DIR/admin.kubeconfig).
    #[arg(long)]
    write_kubeconfig: Option<PathBuf>,
    /// Extra names or addresses for the serving certificate.
    #[arg(long = "tls-san")]
    tls_san: Vec<String>,
    /// Store events kept for watches to resume from.
    #[arg(long, default_value_t = 10_000)]
    watch_history: usize,
    /// Static bearer tokens: lines of `token,user,uid,"group1,group2"`.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// Pod addresses of the cluster; each node gets a /24 of it.
    #[arg(long, default_value = "10.42.0.0/16")]
    cluster_cidr: String,
    /// Cluster IPs of Services (the first one is the `kubernetes` Service's).
    #[arg(long, default_value = berth_shared::admission::service_allocation::DEFAULT_SERVICE_CIDR)]
    service_cidr: String,
    /// An address pool for `type: LoadBalancer` Services, a CIDR (`192.0.2.0/28`, network
    /// and broadcast addresses left out) or a range (`192.0.2.10-192.0.2.20`); repeatable.
    /// Without any, a LoadBalancer's ingress is the Ready nodes' addresses (k3s ServiceLB's).
    #[arg(long = "service-lb-pool")]
    service_lb_pool: Vec<String>,
    /// Open connections at most (also kept under the open-files limit); at the cap a new
    /// connection sheds one that is handshaking or idle.
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// A TLS handshake must finish within this (0 disables).
    #[arg(long, default_value = "10s", value_parser = server::parse_duration)]
    tls_handshake_timeout: Duration,
    /// An HTTP/1 request head must arrive within this of its first byte (0 disables).
    #[arg(long, default_value = "10s", value_parser = server::parse_duration)]
    header_read_timeout: Duration,
    /// A connection with no open request is closed after this (0 disables). Watches and
    /// log or exec streams are open requests.
    #[arg(long, default_value = "90s", value_parser = server::parse_duration)]
    idle_connection_timeout: Duration,
    /// Read-only requests in flight at most, over which 429 (0: no limit). Watches, exec,
    /// attach, log, port-forward and proxy are not counted; system:masters is never refused.
    #[arg(long, default_value_t = 400)]
    max_requests_inflight: usize,
    /// Mutating requests in flight at most, over which 429 (0: no limit).
    #[arg(long, default_value_t = 200)]
    max_mutating_requests_inflight: usize,
    /// An address range (CIDR) any node may put in its certificate besides the address it
    /// joins from: for nodes behind NAT or with several interfaces (repeatable).
    #[arg(long = "node-address-range")]
    node_address_range: Vec<IpRange>,
    /// How long a node may post no heartbeat (Lease renewal or status) before its conditions
    /// become Unknown and it is tainted unreachable.
    #[arg(long, default_value = "40s", value_parser = server::parse_duration)]
    node_monitor_grace_period: Duration,
    /// How long a node Lease renewal may wait for other writes to share its commit (one fsync
    /// for many heartbeats, as etcd's batch interval; any other write ends the wait at once).
    /// The embedded store only; 0: each renewal is committed on its own.
    #[arg(long, default_value = "100ms", value_parser = server::parse_duration)]
    heartbeat_batch_interval: Duration,
    /// How often each agent's resource metrics are scraped for the metrics API (`kubectl top`);
    /// usage is reported over the window between two scrapes (metrics-server's flag).
    #[arg(long, default_value = "15s", value_parser = server::parse_duration)]
    metric_resolution: Duration,
    /// How often each HorizontalPodAutoscaler is reconciled (kube-controller-manager's flag).
    #[arg(long, default_value = "15s", value_parser = server::parse_duration)]
    horizontal_pod_autoscaler_sync_period: Duration,
    /// Finished (Succeeded or Failed) pods kept at most: beyond it the oldest are deleted,
    /// evicted ones first (kube-controller-manager's flag; 0: no limit).
    #[arg(long, default_value_t = berth_cluster_controllers::podgc::terminated::DEFAULT_THRESHOLD)]
    terminated_pod_gc_threshold: usize,
    /// How long the certificates this controller issues are valid (`8760h`, `2m`): its
    /// serving and admin certificates, nodes' certificates at join, and at most those its
    /// CSR signers issue. The serving certificate renews itself at 70–90% of it.
    #[arg(long, default_value = "8760h", value_parser = server::parse_duration)]
    certificate_validity: Duration,
    #[command(flatten)]
    datastore: DatastoreArgs,
    /// How often etcd's history older than the previous run is compacted (the API server's
    /// `--etcd-compaction-interval`).
    #[arg(long, default_value = "5m", value_parser = server::parse_duration)]
    etcd_compaction_interval: Duration,
    /// This controller's identity for leader election (default: hostname and listen port).
    #[arg(long)]
    leader_election_id: Option<String>,
    /// How long a candidate waits after the last change of the leader's Lease it saw before
    /// taking it (kube-controller-manager's flag).
    #[arg(long, default_value = "15s", value_parser = server::parse_duration)]
    leader_elect_lease_duration: Duration,
    /// How long a leader keeps acting without renewing its Lease.
    #[arg(long, default_value = "10s", value_parser = server::parse_duration)]
    leader_elect_renew_deadline: Duration,
    /// How often the Lease is renewed, or tried by a candidate.
    #[arg(long, default_value = "2s", value_parser = server::parse_duration)]
    leader_elect_retry_period: Duration,
    #[command(flatten)]
    pod_security: PodSecurityArgs,
}

/// Pod Security admission's defaults and exemptions (upstream's `PodSecurity`
/// AdmissionConfiguration). Namespace labels `pod-security.kubernetes.io/*` win over the
/// defaults.
#[derive(clap::Args)]
struct PodSecurityArgs {
    /// The enforce level of namespaces without an enforce label: privileged, baseline or
    /// restricted (`baseline` refuses privileged pods everywhere).
    #[arg(long, default_value = "privileged")]
    pod_security_default: Level,
    /// The warn level of namespaces without a warn label (default: --pod-security-default).
    #[arg(long)]
    pod_security_default_warn: Option<Level>,
    /// The audit level of namespaces without an audit label (default: --pod-security-default);
    /// Berth has no audit log: violations are logged (target `pod_security_audit`).
    #[arg(long)]
    pod_security_default_audit: Option<Level>,
    /// The version of the default levels: `latest` or `v1.N`.
    #[arg(long, default_value = "latest")]
    pod_security_default_version: Version,
    /// Users whose writes are never checked (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    pod_security_exempt_usernames: Vec<String>,
    /// Namespaces whose pods and workloads are never checked.
    #[arg(long, value_delimiter = ',')]
    pod_security_exempt_namespaces: Vec<String>,
    /// Runtime classes whose pods are never checked.
    #[arg(long, value_delimiter = ',')]
    pod_security_exempt_runtime_classes: Vec<String>,
}

impl PodSecurityArgs {
    fn config(self) -> pod_security::Config {
        let version = self.pod_security_default_version;
        let at = |level: Level| pod_security::LevelVersion::new(level, version);
        let enforce = self.pod_security_default;
        pod_security::Config {
            defaults: pod_security::Policy {
                enforce: at(enforce),
                warn: at(self.pod_security_default_warn.unwrap_or(enforce)),
                audit: at(self.pod_security_default_audit.unwrap_or(enforce)),
            },
            exemptions: pod_security::Exemptions {
                usernames: self.pod_security_exempt_usernames,
                namespaces: self.pod_security_exempt_namespaces,
                runtime_classes: self.pod_security_exempt_runtime_classes,
            },
        }
    }
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Make a join token that joins only as node NAME, and print it (its secret is shown only
    /// now; the controller keeps a digest). Agents use it as they use the cluster's token.
    Create {
        /// The only node name the token joins as.
        #[arg(long)]
        node: String,
        /// How long the token joins (`0`: for ever).
        #[arg(long, default_value = "24h", value_parser = server::parse_duration)]
        ttl: Duration,
    },
    /// List the per-node join tokens: id, node and expiry (never the secret).
    List,
    /// Delete a per-node join token: it joins nothing from then on.
    Delete {
        /// The token's id (the 6 characters after `::node:`).
        id: String,
    },
    /// Replace the cluster's join token and print the new one: the old one joins nothing from
    /// then on; nodes that have joined keep their certificates. Works whether or not the
    /// controller runs.
    Rotate,
}

#[derive(Subcommand)]
enum NodeCommand {
    /// Forget the secret registered for a node name, so that the next agent to join under it
    /// registers its own (for a reinstalled host). Works whether or not the controller runs.
    Forget {
        /// The node name.
        name: String,
        #[arg(long, default_value = "/var/lib/berth/controller")]
        data_dir: PathBuf,
        /// The records of controllers on etcd are in etcd.
        #[command(flatten)]
        datastore: DatastoreArgs,
    },
}

/// The CA certificate of `data_dir`, creating the PKI if there is none yet (the serving
/// certificate is the server's business).
fn ca_pem(data_dir: &Path) -> anyhow::Result<String> {
    match std::fs::read_to_string(data_dir.join("pki").join("ca.crt")) {
        Ok(ca) => Ok(ca),
        Err(_) => Ok(
            berth_apiserver::pki::load_or_create(&data_dir.join("pki"), &[])
                .context("creating the PKI")?
                .ca_cert,
        ),
    }
}

fn token(command: Option<TokenCommand>, data_dir: &Path) -> anyhow::Result<()> {
    let tokens = JoinTokens::new(data_dir);
    match command {
        None => {
            let token = tokens
                .load_or_create_cluster(&ca_pem(data_dir)?)
                .context("loading the token")?;
            println!("{token}");
        }
        Some(TokenCommand::Create { node, ttl }) => {
            let node = node_name(&node)?;
            let ttl = (!ttl.is_zero()).then_some(ttl);
            let (made, token) = tokens
                .create(&node, ttl, &ca_pem(data_dir)?, jiff::Timestamp::now())
                .context("making the token")?;
            println!("{token}");
            let until = made
                .expires
                .map_or_else(|| "it is deleted".to_string(), |at| at.to_string());
            eprintln!(
                "join token {} joins only as node {node}, until {until}",
                made.id
            );
        }
        Some(TokenCommand::List) => {
            let now = jiff::Timestamp::now();
            let rows: Vec<[String; 3]> = tokens
                .list()
                .context("listing the tokens")?
                .into_iter()
                .map(|t| {
                    let expires = match t.expires {
                        None => "never".to_string(),
                        Some(at) if t.expired(now) => format!("{at} (expired)"),
                        Some(at) => at.to_string(),
                    };
                    [t.id.to_string(), t.node.to_string(), expires]
                })
                .collect();
            let header = ["ID".to_string(), "NODE".into(), "EXPIRES".into()];
            let width = |i: usize| {
                std::iter::once(&header)
                    .chain(&rows)
                    .map(|r| r[i].len())
                    .max()
                    .unwrap_or(0)
            };
            let (w0, w1) = (width(0), width(1));
            for [id, node, expires] in std::iter::once(&header).chain(&rows) {
                println!("{id:w0$}   {node:w1$}   {expires}");
            }
        }
        Some(TokenCommand::Delete { id }) => {
            let id = TokenId::parse(&id)?;
            if !tokens.delete(&id).context("deleting the token")? {
                anyhow::bail!("there is no join token {id}");
            }
            println!("join token {id} deleted");
        }
        Some(TokenCommand::Rotate) => {
            let token = tokens
                .rotate(&ca_pem(data_dir)?)
                .context("rotating the token")?;
            println!("{token}");
            eprintln!(
                "the cluster's join token is replaced: the old one joins nothing from now on \
                 (nodes that joined keep their certificates; give agents the new token before \
                 their certificates are renewed)"
            );
        }
    }
    Ok(())
}

fn node_name(name: &str) -> anyhow::Result<NodeName> {
    NodeName::parse(name).map_err(|errors| {
        let messages: Vec<String> = errors.iter().map(|e| e.message()).collect();
        anyhow::anyhow!("invalid node name: {}", messages.join("; "))
    })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    berth_shared::logging::init(cli.v, &cli.log_format);
    match cli.command {
        Command::Token { command, data_dir } => token(command, &data_dir),
        Command::Snapshot { command } => snapshot(command),
        Command::Certificate {
            command:
                CertificateCommand::Renew {
                    data_dir,
                    kubeconfig,
                    certificate_validity,
                },
        } => renew_certificates(&data_dir, kubeconfig, certificate_validity),
        Command::Node {
            command:
                NodeCommand::Forget {
                    name,
                    data_dir,
                    datastore,
                },
        } => {
            let name = node_name(&name)?;
            let passwords = match datastore.etcd() {
                Some(etcd) => {
                    let store =
                        berth_store::Store::open_etcd(etcd, 1).context("opening the etcd store")?;
                    NodePasswords::in_store(&data_dir, store)
                }
                None => NodePasswords::new(&data_dir),
            };
            if passwords.forget(&name).context("forgetting the node")? {
                println!(
                    "node {name} forgotten: the next agent to join as {name} registers its own secret"
                );
            } else {
                println!("node {name} has no registered secret");
            }
            Ok(())
        }
        Command::Serve(args) => {
            let ServeArgs {
                data_dir,
                listen,
                write_kubeconfig,
                tls_san,
                watch_history,
                token_auth_file,
                cluster_cidr,
                service_cidr,
                service_lb_pool,
                max_connections,
                tls_handshake_timeout,
                header_read_timeout,
                idle_connection_timeout,
                max_requests_inflight,
                max_mutating_requests_inflight,
                node_address_range,
                node_monitor_grace_period,
                heartbeat_batch_interval,
                metric_resolution,
                horizontal_pod_autoscaler_sync_period,
                terminated_pod_gc_threshold,
                certificate_validity,
                datastore,
                etcd_compaction_interval,
                leader_election_id,
                leader_elect_lease_duration,
                leader_elect_renew_deadline,
                leader_elect_retry_period,
                pod_security,
            } = *args;
            let leader_election = berth_runtime::leader_election::Timings {
                lease_duration: leader_elect_lease_duration,
                renew_deadline: leader_elect_renew_deadline,
                retry_period: leader_elect_retry_period,
            };
            leader_election.check().map_err(anyhow::Error::msg)?;
            let datastore = datastore.etcd().map(|mut etcd| {
                etcd.compaction_interval = etcd_compaction_interval;
                etcd
            });
            let config = Config {
                data_dir,
                listen,
                kubeconfig: write_kubeconfig,
                tls_sans: tls_san,
                watch_history,
                token_auth_file,
                cluster_cidr,
                service_cidr,
                service_lb_pools: service_lb_pool,
                node_address_ranges: node_address_range,
                connections: ConnectionLimits {
                    max_connections,
                    timeouts: Timeouts {
                        tls_handshake: tls_handshake_timeout,
                        header_read: header_read_timeout,
                        idle: idle_connection_timeout,
                    },
                },
                max_requests_inflight,
                max_mutating_requests_inflight,
                node_monitor_grace_period,
                heartbeat_batch_interval,
                metric_resolution,
                hpa_sync_period: horizontal_pod_autoscaler_sync_period,
                terminated_pod_gc_threshold,
                certificate_validity,
                datastore,
                leader_election_id,
                leader_election,
                pod_security: pod_security.config(),
            };
            let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
            runtime.block_on(async move {
                let shutdown = CancellationToken::new();
                let signals = shutdown.clone();
                tokio::spawn(async move {
                    use tokio::signal::unix::{SignalKind, signal};
                    let (Ok(mut term), Ok(mut int)) = (
                        signal(SignalKind::terminate()),
                        signal(SignalKind::interrupt()),
                    ) else {
                        return;
                    };
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                    signals.cancel();
                });
                server::run(config, shutdown)
                    .await
                    .context("controller failed")
            })
        }
    }
}
