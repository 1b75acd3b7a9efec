//! Judging a pod's sandbox from what the host shows of it: the recorded network, its netns,
//! and the namespace and addresses of each running container. The kubelet asks the runtime
//! whether the sandbox is still ready; we check it ourselves on every pass, since a pod must
//! never be left running without its network: a namespace that was deleted, unmounted or
//! replaced, a veth or address that went away, or containers running outside the recorded
//! namespace all make the sandbox `NotReady`, which the planner answers as the kubelet does
//! (`SandboxChanged`: kill the pod, remove the sandbox, make a new one, restart the
//! containers in it).
//!
//! Planner: pure, no I/O.

use crate::network::{NetnsPresence, NetworkFacts, ProcessNetwork, Record};

use super::model::{Sandbox, SandboxFault};

/// Everything the judgement rests on, for one pod.
#[derive(Clone, Copy, Debug)]
pub struct SandboxFacts<'a> {
    /// `spec.hostNetwork`: the pod has no sandbox network of its own.
    pub host_network: bool,
    /// The node's address (a host-network pod's IP).
    pub host_ip: &'a str,
    /// The sandbox generation: the one this agent process made, else the newest among the
    /// pod's container labels; `None` when neither is known.
    pub attempt: Option<u32>,
    /// The pod's network (ignored for host-network pods).
    pub network: &'a NetworkFacts,
    /// The network of each running container of the pod.
    pub running: &'a [ProcessNetwork],
}

/// The sandbox as the planner sees it.
///
/// * A host-network pod's sandbox is ready once it has a generation.
/// * Without a complete record there is no sandbox: `Absent` (setup then undoes any leftover),
///   unless containers run, which have no network then: `NotReady`.
/// * A complete record is `Ready` only if its namespace is mounted, its veth is there, and every
///   running container whose namespace could be read is in that namespace and has the
///   recorded address there. Containers whose process could not be read (it just exited) are
///   no evidence either way.
pub fn judge_sandbox(f: &SandboxFacts<'_>) -> Sandbox {
    if f.host_network {
        return match f.attempt {
            Some(attempt) => Sandbox::Ready {
                attempt,
                ips: vec![f.host_ip.to_string()],
            },
            None => Sandbox::Absent,
        };
    }
    let attempt = f.attempt.unwrap_or(0);
    let broken = |fault| Sandbox::NotReady { attempt, fault };
    let recorded = match &f.network.record {
        Record::Complete(r) => r,
        Record::None | Record::Incomplete => {
            return if f.running.is_empty() {
                Sandbox::Absent
            } else {
                broken(SandboxFault::NoNetwork)
            };
        }
    };
    let netns = match f.network.netns {
        NetnsPresence::Absent => return broken(SandboxFault::NetnsMissing),
        NetnsPresence::NotMounted => return broken(SandboxFault::NetnsNotMounted),
        NetnsPresence::Mounted(id) => id,
    };
    if recorded.host_veth == Some(false) {
        return broken(SandboxFault::VethMissing);
    }
    if f.running
        .iter()
        .any(|p| p.netns.is_some_and(|n| n != netns))
    {
        return broken(SandboxFault::ContainerElsewhere);
    }
    let lost_address = |p: &ProcessNetwork| {
        p.ipv4
            .as_ref()
            .is_some_and(|ips| !ips.contains(&recorded.ip))
    };
    if f.running.iter().any(lost_address) {
        return broken(SandboxFault::AddressMissing);
    }
    Sandbox::Ready {
        attempt,
        ips: vec![recorded.ip.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use crate::network::{NetnsId, RecordedNetwork};

    use super::*;

    const NS: NetnsId = NetnsId { dev: 4, ino: 100 };
    const OTHER_NS: NetnsId = NetnsId { dev: 4, ino: 200 };

    fn complete(netns: NetnsPresence, host_veth: Option<bool>) -> NetworkFacts {
        NetworkFacts {
            record: Record::Complete(RecordedNetwork {
                netns_path: "/var/run/netns/berth-n-i-u1".into(),
                ip: [10, 42, 0, 5].into(),
                gateway: [10, 42, 0, 1].into(),
                host_veth,
            }),
            netns,
        }
    }

    fn healthy() -> NetworkFacts {
        complete(NetnsPresence::Mounted(NS), Some(true))
    }

    fn none(netns: NetnsPresence) -> NetworkFacts {
        NetworkFacts {
            record: Record::None,
            netns,
        }
    }

    /// A container in `netns` with eth0 at `ip` (and loopback).
    fn process(netns: NetnsId, ip: [u8; 4]) -> ProcessNetwork {
        ProcessNetwork {
            netns: Some(netns),
            ipv4: Some(vec![ip.into(), [127, 0, 0, 1].into()]),
        }
    }

    fn ready(attempt: u32) -> Sandbox {
        Sandbox::Ready {
            attempt,
            ips: vec!["10.42.0.5".into()],
        }
    }

    fn not_ready(fault: SandboxFault) -> Sandbox {
        Sandbox::NotReady { attempt: 1, fault }
    }

    #[test]
    fn a_pod_network_is_judged_from_its_record_namespace_veth_and_containers() {
        use SandboxFault::*;
        let in_ns = process(NS, [10, 42, 0, 5]);
        let unreadable = ProcessNetwork::default();
        let table: Vec<(&str, NetworkFacts, Vec<ProcessNetwork>, Sandbox)> = vec![
            (
                "nothing recorded, nothing runs",
                none(NetnsPresence::Absent),
                vec![],
                Sandbox::Absent,
            ),
            (
                "a leftover netns without a record is setup's to undo",
                none(NetnsPresence::Mounted(NS)),
                vec![],
                Sandbox::Absent,
            ),
            (
                "a half-done setup is setup's to redo",
                NetworkFacts {
                    record: Record::Incomplete,
                    netns: NetnsPresence::Mounted(NS),
                },
                vec![],
                Sandbox::Absent,
            ),
            (
                "containers running with no network recorded",
                none(NetnsPresence::Absent),
                vec![in_ns.clone()],
                not_ready(NoNetwork),
            ),
            (
                "containers running beside a half-done setup",
                NetworkFacts {
                    record: Record::Incomplete,
                    netns: NetnsPresence::Absent,
                },
                vec![in_ns.clone()],
                not_ready(NoNetwork),
            ),
            (
                "healthy, containers inside",
                healthy(),
                vec![in_ns.clone(), in_ns.clone()],
                ready(1),
            ),
            ("healthy, nothing running", healthy(), vec![], ready(1)),
            (
                "a container that just exited is no evidence",
                healthy(),
                vec![unreadable.clone()],
                ready(1),
            ),
            (
                "a result without a host veth is not checked for one",
                complete(NetnsPresence::Mounted(NS), None),
                vec![in_ns.clone()],
                ready(1),
            ),
            (
                "the namespace was deleted under running containers",
                complete(NetnsPresence::Absent, Some(true)),
                vec![in_ns.clone()],
                not_ready(NetnsMissing),
            ),
            (
                "the namespace was deleted while nothing ran",
                complete(NetnsPresence::Absent, Some(false)),
                vec![],
                not_ready(NetnsMissing),
            ),
            (
                "the namespace file is left without a namespace (a reboot)",
                complete(NetnsPresence::NotMounted, Some(false)),
                vec![],
                not_ready(NetnsNotMounted),
            ),
            (
                "the veth is gone",
                complete(NetnsPresence::Mounted(NS), Some(false)),
                vec![],
                not_ready(VethMissing),
            ),
            (
                "a new namespace was made under the old name around running containers",
                healthy(),
                vec![process(OTHER_NS, [10, 42, 0, 9])],
                not_ready(ContainerElsewhere),
            ),
            (
                "one container of two is elsewhere",
                healthy(),
                vec![in_ns.clone(), process(OTHER_NS, [10, 42, 0, 5])],
                not_ready(ContainerElsewhere),
            ),
            (
                "the address was removed from the pod's namespace",
                healthy(),
                vec![ProcessNetwork {
                    netns: Some(NS),
                    ipv4: Some(vec![[127, 0, 0, 1].into()]),
                }],
                not_ready(AddressMissing),
            ),
        ];
        for (what, network, running, want) in table {
            let facts = SandboxFacts {
                host_network: false,
                host_ip: "192.168.1.10",
                attempt: Some(1),
                network: &network,
                running: &running,
            };
            assert_eq!(judge_sandbox(&facts), want, "{what}");
        }
    }

    #[test]
    fn without_a_known_generation_a_recorded_sandbox_is_generation_zero() {
        let network = healthy();
        let facts = SandboxFacts {
            host_network: false,
            host_ip: "192.168.1.10",
            attempt: None,
            network: &network,
            running: &[],
        };
        assert_eq!(judge_sandbox(&facts), ready(0));
    }

    #[test]
    fn a_host_network_pod_is_ready_once_it_has_a_generation_whatever_the_pod_network() {
        let network = complete(NetnsPresence::Absent, Some(false));
        let facts = |attempt| SandboxFacts {
            host_network: true,
            host_ip: "192.168.1.10",
            attempt,
            network: &network,
            running: &[],
        };
        assert_eq!(judge_sandbox(&facts(None)), Sandbox::Absent);
        assert_eq!(
            judge_sandbox(&facts(Some(2))),
            Sandbox::Ready {
                attempt: 2,
                ips: vec!["192.168.1.10".into()],
            }
        );
    }
}
