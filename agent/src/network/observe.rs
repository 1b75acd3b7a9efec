//! Reading what exists of a pod's network without changing anything: the recorded setup, the
//! named netns (and whether a namespace is still mounted on it), the host end of the veth; and
//! which namespace a process is in, with its addresses there. The pod worker judges a sandbox
//! from these (`pod::sandbox`); nothing here decides.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use super::netns::{self, NetnsId, NetnsPresence};
use super::{Network, NetworkError, config, fib_trie, link_exists, state};

/// A pod's network as the host shows it now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkFacts {
    pub record: Record,
    /// The recorded netns (or, without a record, the one this agent would make for the pod).
    pub netns: NetnsPresence,
}

/// What this agent's state dir records of the pod's network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Record {
    /// Nothing: never set up, or torn down.
    #[default]
    None,
    /// A setup began and did not finish (or its state file cannot be read): setup undoes it.
    Incomplete,
    /// Every attachment succeeded.
    Complete(RecordedNetwork),
}

/// A finished setup, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedNetwork {
    pub netns_path: PathBuf,
    pub ip: Ipv4Addr,
    pub gateway: Ipv4Addr,
    /// Whether the host end of the pod's veth still exists (`None` when the result names none).
    pub host_veth: Option<bool>,
}

/// The network of one process (a container's main process), from `/proc/<pid>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessNetwork {
    /// The namespace it is in; `None` when it could not be read (the process is gone).
    pub netns: Option<NetnsId>,
    /// Its local IPv4 addresses there; `None` when they could not be read.
    pub ipv4: Option<Vec<Ipv4Addr>>,
}

impl Network {
    /// What exists of the pod's network now; changes nothing.
    pub async fn observe(&self, pod_uid: &str) -> Result<NetworkFacts, NetworkError> {
        config::validate_uid(pod_uid)?;
        let _lock = self.locks.lock(pod_uid).await;
        let recorded = match state::read(&self.cfg.state_dir, pod_uid).await {
            Ok(st) => st,
            Err(NetworkError::State { .. }) => {
                let netns = netns::presence(&self.netns_name(pod_uid)).await?;
                return Ok(NetworkFacts {
                    record: Record::Incomplete,
                    netns,
                });
            }
            Err(e) => return Err(e),
        };
        let Some(st) = recorded else {
            let netns = netns::presence(&self.netns_name(pod_uid)).await?;
            return Ok(NetworkFacts {
                record: Record::None,
                netns,
            });
        };
        let name = self.recorded_netns_name(&st, pod_uid);
        let netns = netns::presence(&name).await?;
        let address = if st.complete {
            self.eth0_address(&st)
        } else {
            None
        };
        let Some(address) = address else {
            return Ok(NetworkFacts {
                record: Record::Incomplete,
                netns,
            });
        };
        let host_veth = match &address.host_veth {
            Some(veth) => Some(link_exists(veth).await),
            None => None,
        };
        Ok(NetworkFacts {
            record: Record::Complete(RecordedNetwork {
                netns_path: netns::path(&name),
                ip: address.ip,
                gateway: address.gateway,
                host_veth,
            }),
            netns,
        })
    }
}

/// The namespace process `pid` is in and its local addresses there.
pub async fn observe_process(pid: u32) -> ProcessNetwork {
    let netns = netns::of_process(pid).await;
    let ipv4 = tokio::fs::read_to_string(format!("/proc/{pid}/net/fib_trie"))
        .await
        .ok()
        .map(|listing| fib_trie::local_ipv4(&listing));
    ProcessNetwork { netns, ipv4 }
}
