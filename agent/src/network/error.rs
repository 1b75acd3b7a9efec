//! The network module's typed errors, each able to say whether a retry may succeed.

use std::path::PathBuf;

/// Why setting up or tearing down pod networking failed.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// A `NetworkConfig` field cannot be used (for example a malformed CIDR).
    #[error("invalid network config {field} = {value:?}: {reason}")]
    InvalidConfig {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    /// The pod's identity cannot be turned into netns and CNI names.
    #[error("invalid pod {field} {value:?}: {reason}")]
    InvalidPod {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A program (CNI plugin, `ip`, `iptables`) could not be started at all.
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A host tool (`ip`, `iptables`) exited unsuccessfully.
    #[error("{command} failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    /// A program did not finish within its deadline (it was killed).
    #[error("{program} did not finish within {seconds} s")]
    Timeout { program: String, seconds: u64 },
    /// A CNI plugin reported an error result (CNI spec error codes).
    #[error("CNI plugin {plugin} {command} failed (code {code}): {msg}{}", detail_suffix(.details))]
    Plugin {
        plugin: String,
        command: &'static str,
        code: u32,
        msg: String,
        details: String,
    },
    /// A CNI plugin's output is not a result we understand.
    #[error("CNI plugin {plugin} {command} returned an unusable result: {reason}")]
    PluginOutput {
        plugin: String,
        command: &'static str,
        reason: String,
    },
    /// Reading or writing the module's own files failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A per-pod state file exists but cannot be parsed.
    #[error("corrupt network state {}: {source}", path.display())]
    State {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

fn detail_suffix(details: &str) -> String {
    if details.is_empty() {
        String::new()
    } else {
        format!(" ({details})")
    }
}

/// CNI spec error code 11: "Try again later".
const CNI_TRY_AGAIN_LATER: u32 = 11;

impl NetworkError {
    /// Whether the same call may succeed later without a change of configuration.
    pub fn is_transient(&self) -> bool {
        match self {
            NetworkError::InvalidConfig { .. }
            | NetworkError::InvalidPod { .. }
            | NetworkError::Spawn { .. }
            | NetworkError::PluginOutput { .. }
            | NetworkError::State { .. } => false,
            NetworkError::Plugin { code, .. } => *code == CNI_TRY_AGAIN_LATER || *code >= 100,
            NetworkError::Command { .. }
            | NetworkError::Timeout { .. }
            | NetworkError::Io { .. } => true,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> NetworkError {
        NetworkError::Io {
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(code: u32) -> NetworkError {
        NetworkError::Plugin {
            plugin: "bridge".into(),
            command: "ADD",
            code,
            msg: "m".into(),
            details: String::new(),
        }
    }

    #[test]
    fn plugin_errors_are_transient_only_for_try_again_and_plugin_specific_codes() {
        // 1-10 are the spec's well-known permanent errors (version, config, ...), 11 is "try
        // again later", 100+ are plugin specific (e.g. the bridge plugin's 999 for a netlink
        // failure): we retry those rather than give up on a pod for good.
        for (code, transient) in [(1, false), (4, false), (7, false), (11, true), (999, true)] {
            assert_eq!(plugin(code).is_transient(), transient, "code {code}");
        }
    }

    #[test]
    fn config_errors_are_permanent_and_command_failures_are_not() {
        let bad = NetworkError::InvalidConfig {
            field: "pod_cidr",
            value: "x".into(),
            reason: "r",
        };
        assert!(!bad.is_transient());
        let cmd = NetworkError::Command {
            command: "iptables".into(),
            status: "exit status: 4".into(),
            stderr: "lock".into(),
        };
        assert!(cmd.is_transient());
    }

    #[test]
    fn plugin_error_message_includes_details_when_present() {
        let e = NetworkError::Plugin {
            plugin: "bridge".into(),
            command: "ADD",
            code: 999,
            msg: "failed".into(),
            details: "netlink".into(),
        };
        assert_eq!(
            e.to_string(),
            "CNI plugin bridge ADD failed (code 999): failed (netlink)"
        );
        assert_eq!(
            plugin(7).to_string(),
            "CNI plugin bridge ADD failed (code 7): m"
        );
    }
}
