//! What localhost NodePorts need besides their nat rules (kube-proxy's
//! `--iptables-localhost-nodeports`, on by default): `net.ipv4.conf.all.route_localnet=1`, so a
//! packet from 127.0.0.1 that was DNATed to a pod may leave through the pod bridge, and the
//! localnet firewall chain ([`plan::localnet_firewall`], jumped to from filter INPUT and
//! OUTPUT) that closes the hole this opens. The sysctl's value from before the agent first set
//! it is kept in `<state dir>/route-localnet`; starting with the flag off, and `berth-agent
//! uninstall`, write it back and remove the chain.

use std::path::{Path, PathBuf};

use super::plan;
use crate::network::NetworkError;
use crate::network::command;
use crate::network::iptables::{self, Rule};

/// The sysctl, in this network namespace (it is per namespace).
const ROUTE_LOCALNET: &str = "/proc/sys/net/ipv4/conf/all/route_localnet";

/// Where the value from before the agent changed it is kept.
pub fn saved_value_file(state_dir: &Path) -> PathBuf {
    state_dir.join("route-localnet")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> NetworkError + '_ {
    move |source| NetworkError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The jumps into the localnet firewall chain.
fn jumps(network: &str) -> Vec<Rule> {
    let chain = plan::localnet_firewall(network).chain;
    ["INPUT", "OUTPUT"]
        .into_iter()
        .map(|from| Rule::jump("filter", from, network, "localnet firewall", &chain))
        .collect()
}

/// Turns localhost NodePorts' host side on: the firewall first, then the sysctl (saving the
/// value it had, unless an earlier run saved it already).
pub async fn enable(state_dir: &Path, network: &str) -> Result<(), NetworkError> {
    iptables::restore(&plan::localnet_firewall(network).restore).await?;
    for jump in jumps(network) {
        iptables::ensure(&jump).await?;
    }
    let path = Path::new(ROUTE_LOCALNET);
    let now = tokio::fs::read_to_string(path).await.map_err(io(path))?;
    let now = now.trim();
    if now == "1" {
        return Ok(());
    }
    let saved = saved_value_file(state_dir);
    if tokio::fs::metadata(&saved).await.is_err() {
        tokio::fs::create_dir_all(state_dir)
            .await
            .map_err(io(state_dir))?;
        tokio::fs::write(&saved, format!("{now}\n"))
            .await
            .map_err(io(&saved))?;
    }
    tracing::info!(
        "setting route_localnet=1 to allow node ports on localhost; to change this, pass \
         --iptables-localhost-nodeports=false"
    );
    tokio::fs::write(path, "1\n").await.map_err(io(path))
}

/// Turns it off: the firewall chain and its jumps removed, the sysctl written back if the agent
/// changed it. Returns whether a saved value was written back.
pub async fn disable(state_dir: &Path, network: &str) -> Result<bool, NetworkError> {
    remove_firewall(network).await?;
    restore_sysctl(state_dir).await
}

/// Removes the firewall chain and its jumps (absent ones are fine).
pub async fn remove_firewall(network: &str) -> Result<(), NetworkError> {
    for jump in jumps(network) {
        iptables::remove(&jump).await?;
    }
    let chain = plan::localnet_firewall(network).chain;
    for op in ["-F", "-X"] {
        // An absent chain fails both: nothing to remove.
        let _ = command::run(
            Path::new("iptables"),
            &["-w", "5", "-t", "filter", op, &chain],
            &[],
            None,
            command::TOOL_DEADLINE,
        )
        .await?;
    }
    Ok(())
}

/// Writes back the sysctl value saved before the agent set it, and forgets it; `false` when
/// nothing was saved.
pub async fn restore_sysctl(state_dir: &Path) -> Result<bool, NetworkError> {
    let saved = saved_value_file(state_dir);
    let value = match tokio::fs::read_to_string(&saved).await {
        Ok(v) => v,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io(&saved)(e)),
    };
    let value = value.trim();
    if value == "0" || value == "1" {
        let path = Path::new(ROUTE_LOCALNET);
        tokio::fs::write(path, format!("{value}\n"))
            .await
            .map_err(io(path))?;
    }
    tokio::fs::remove_file(&saved).await.map_err(io(&saved))?;
    Ok(true)
}
