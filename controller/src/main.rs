//! `berth-controller`: parses flags and runs the control plane.

use anyhow::Context;
use berth_controller::api::listener::{ConnectionLimits, Timeouts};
use berth_controller::join::addresses::IpRange;
use berth_controller::join::node_name::NodeName;
use berth_controller::join::passwords::NodePasswords;
use berth_controller::server::{self, Config};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

// jemalloc hands freed memory back to the system (its background threads purge); glibc's
// per-thread arenas kept hundreds of MB of it (heap 176 MB, RSS 450 MB with 20,000 pods), and
// mimalloc's per-thread heaps grew by ~100 MB during a burst of requests.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "berth-controller", version, about = "Berth's control plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the join token agents use (`--token`), creating it if needed.
    Token {
        #[arg(long, default_value = "/var/lib/berth/controller")]
        data_dir: PathBuf,
    },
    /// Manage the identities of nodes.
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Serve the Kubernetes API and run the controllers.
    Serve(Box<ServeArgs>),
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
    },
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BERTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Token { data_dir } => {
            // Only the CA is needed; the serving certificate is the server's business.
            let ca_path = data_dir.join("pki").join("ca.crt");
            let ca = match std::fs::read_to_string(&ca_path) {
                Ok(ca) => ca,
                Err(_) => {
                    berth_controller::pki::load_or_create(&data_dir.join("pki"), &[])
                        .context("creating the PKI")?
                        .ca_cert
                }
            };
            let (token, _) = berth_controller::join::load_or_create_token(&data_dir, &ca)
                .context("loading the token")?;
            println!("{token}");
            Ok(())
        }
        Command::Node {
            command: NodeCommand::Forget { name, data_dir },
        } => {
            let name = NodeName::parse(&name).map_err(|errors| {
                let messages: Vec<String> = errors.iter().map(|e| e.message()).collect();
                anyhow::anyhow!("invalid node name: {}", messages.join("; "))
            })?;
            let passwords = NodePasswords::new(&data_dir);
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
                max_connections,
                tls_handshake_timeout,
                header_read_timeout,
                idle_connection_timeout,
                max_requests_inflight,
                max_mutating_requests_inflight,
                node_address_range,
                node_monitor_grace_period,
            } = *args;
            let config = Config {
                data_dir,
                listen,
                kubeconfig: write_kubeconfig,
                tls_sans: tls_san,
                watch_history,
                token_auth_file,
                cluster_cidr,
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
