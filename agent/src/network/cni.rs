//! Executes CNI plugins as the CNI 1.0.0 spec says (environment variables, config on stdin,
//! result or error on stdout) and reads the pod's address out of a result.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::NetworkError;
use super::command;
use super::plugins::plugin_type;

/// The CNI operations we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Del,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Add => "ADD",
            Op::Del => "DEL",
        }
    }
}

/// Everything about one plugin call except its configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub bin_dir: &'a Path,
    pub container_id: &'a str,
    /// `None` on DEL when the netns is already gone (the spec allows an empty `CNI_NETNS`).
    pub netns: Option<&'a Path>,
    pub if_name: &'a str,
    pub args: &'a str,
}

/// How long a plugin may take; bridge ADD normally needs 30–80 ms.
const PLUGIN_DEADLINE: Duration = Duration::from_secs(60);

/// Runs one plugin. ADD returns the plugin's result; DEL returns `None`.
pub(crate) async fn exec(
    op: Op,
    conf: &Value,
    call: Call<'_>,
) -> Result<Option<Value>, NetworkError> {
    let plugin = plugin_type(conf).to_string();
    if plugin.is_empty() || plugin.contains('/') {
        return Err(NetworkError::PluginOutput {
            plugin,
            command: op.name(),
            reason: "plugin configuration has no usable \"type\"".into(),
        });
    }
    let stdin = serde_json::to_vec(conf).map_err(|e| NetworkError::PluginOutput {
        plugin: plugin.clone(),
        command: op.name(),
        reason: format!("cannot encode configuration: {e}"),
    })?;
    let netns = call.netns.map(Path::as_os_str).unwrap_or_default();
    let env: [(&str, &OsStr); 6] = [
        ("CNI_COMMAND", OsStr::new(op.name())),
        ("CNI_CONTAINERID", OsStr::new(call.container_id)),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", OsStr::new(call.if_name)),
        ("CNI_ARGS", OsStr::new(call.args)),
        ("CNI_PATH", call.bin_dir.as_os_str()),
    ];
    let out = command::run(
        &call.bin_dir.join(&plugin),
        &[],
        &env,
        Some(&stdin),
        PLUGIN_DEADLINE,
    )
    .await?;
    if !out.success {
        return Err(plugin_failure(&plugin, op, &out));
    }
    match op {
        Op::Del => Ok(None),
        Op::Add => {
            serde_json::from_slice(&out.stdout)
                .map(Some)
                .map_err(|e| NetworkError::PluginOutput {
                    plugin,
                    command: op.name(),
                    reason: format!("result is not JSON: {e}"),
                })
        }
    }
}

/// The spec's error result: `{"cniVersion", "code", "msg", "details"}` on stdout.
#[derive(Deserialize)]
struct ErrorResult {
    code: u32,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    details: String,
}

fn plugin_failure(plugin: &str, op: Op, out: &command::Output) -> NetworkError {
    match serde_json::from_slice::<ErrorResult>(&out.stdout) {
        Ok(e) => NetworkError::Plugin {
            plugin: plugin.to_string(),
            command: op.name(),
            code: e.code,
            msg: e.msg,
            details: e.details,
        },
        // A crash (no error result): report what the process said.
        Err(_) => NetworkError::Command {
            command: format!("CNI plugin {plugin} {}", op.name()),
            status: out.status.clone(),
            stderr: format!(
                "{} {}",
                String::from_utf8_lossy(&out.stdout).trim(),
                out.stderr
            )
            .trim()
            .to_string(),
        },
    }
}

#[derive(Deserialize)]
struct AddResult {
    #[serde(default)]
    interfaces: Vec<Interface>,
    #[serde(default)]
    ips: Vec<IpConfig>,
}

#[derive(Deserialize)]
struct Interface {
    name: String,
    #[serde(default)]
    sandbox: Option<String>,
}

#[derive(Deserialize)]
struct IpConfig {
    #[serde(default)]
    interface: Option<usize>,
    address: String,
    #[serde(default)]
    gateway: Option<String>,
}

/// The pod's address on `if_name` as the bridge plugin reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodAddress {
    pub ip: Ipv4Addr,
    pub gateway: Ipv4Addr,
    /// The host end of the veth pair, for a cheap "still there?" check.
    pub host_veth: Option<String>,
}

/// Reads the IPv4 address and gateway of `if_name` (inside the sandbox) from an ADD result.
pub(crate) fn pod_address(
    result: &Value,
    if_name: &str,
    bridge: &str,
) -> Result<PodAddress, String> {
    let parsed: AddResult =
        AddResult::deserialize(result).map_err(|e| format!("not a CNI result: {e}"))?;
    let in_sandbox = |idx: Option<usize>| match idx.and_then(|i| parsed.interfaces.get(i)) {
        Some(iface) => {
            iface.name == if_name && iface.sandbox.as_deref().is_some_and(|s| !s.is_empty())
        }
        // Results without interface indexes: any address is the pod's.
        None => idx.is_none(),
    };
    let entry = parsed
        .ips
        .iter()
        .filter(|ip| in_sandbox(ip.interface))
        .find_map(|ip| {
            let (addr, _) = ip.address.split_once('/')?;
            Some((addr.parse::<Ipv4Addr>().ok()?, ip))
        })
        .ok_or_else(|| format!("no IPv4 address for {if_name}"))?;
    let (ip, conf) = entry;
    let gateway = conf
        .gateway
        .as_deref()
        .ok_or_else(|| format!("no gateway for {ip}"))?
        .parse::<Ipv4Addr>()
        .map_err(|_| format!("gateway of {ip} is not IPv4"))?;
    let host_veth = parsed
        .interfaces
        .iter()
        .find(|i| i.sandbox.as_deref().unwrap_or_default().is_empty() && i.name != bridge)
        .map(|i| i.name.clone());
    Ok(PodAddress {
        ip,
        gateway,
        host_veth,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bridge_result() -> Value {
        json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": "berth0", "mac": "8a:cc:97:4c:8b:fa"},
                {"name": "veth47872659", "mac": "3a:b4:8f:51:65:ff"},
                {"name": "eth0", "mac": "46:fa:74:7a:66:14", "sandbox": "/var/run/netns/p"}
            ],
            "ips": [{"interface": 2, "address": "10.244.250.2/24", "gateway": "10.244.250.1"}],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {}
        })
    }

    #[test]
    fn the_pod_address_is_the_sandbox_interfaces_ipv4() {
        let got = pod_address(&bridge_result(), "eth0", "berth0").unwrap();
        assert_eq!(got.ip, Ipv4Addr::new(10, 244, 250, 2));
        assert_eq!(got.gateway, Ipv4Addr::new(10, 244, 250, 1));
        assert_eq!(got.host_veth.as_deref(), Some("veth47872659"));
    }

    #[test]
    fn ipv6_and_host_side_addresses_are_skipped() {
        let mut r = bridge_result();
        r["ips"] = json!([
            {"interface": 0, "address": "10.244.250.1/24"},
            {"interface": 2, "address": "fd00::2/64", "gateway": "fd00::1"},
            {"interface": 2, "address": "10.244.250.9/24", "gateway": "10.244.250.1"}
        ]);
        let got = pod_address(&r, "eth0", "berth0").unwrap();
        assert_eq!(got.ip, Ipv4Addr::new(10, 244, 250, 9));
    }

    #[test]
    fn results_without_an_address_or_gateway_are_rejected() {
        let mut r = bridge_result();
        r["ips"] = json!([]);
        assert_eq!(
            pod_address(&r, "eth0", "berth0").unwrap_err(),
            "no IPv4 address for eth0"
        );
        r["ips"] = json!([{"interface": 2, "address": "10.244.250.2/24"}]);
        assert_eq!(
            pod_address(&r, "eth0", "berth0").unwrap_err(),
            "no gateway for 10.244.250.2"
        );
        assert!(pod_address(&json!({"ips": 3}), "eth0", "berth0").is_err());
    }

    #[test]
    fn an_error_result_becomes_a_plugin_error() {
        let out = command::Output {
            success: false,
            status: "exit status: 1".into(),
            stdout:
                br#"{"code": 999, "msg": "container veth name provided (eth0) already exists"}"#
                    .to_vec(),
            stderr: String::new(),
        };
        match plugin_failure("bridge", Op::Add, &out) {
            NetworkError::Plugin { code, msg, .. } => {
                assert_eq!(code, 999);
                assert!(msg.contains("already exists"));
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn a_crash_without_error_result_keeps_its_output() {
        let out = command::Output {
            success: false,
            status: "signal: 11".into(),
            stdout: Vec::new(),
            stderr: "panic: boom".into(),
        };
        let err = plugin_failure("bridge", Op::Del, &out);
        assert!(err.is_transient());
        assert!(err.to_string().contains("panic: boom"), "{err}");
    }

    #[tokio::test]
    async fn a_plugin_gets_the_cni_environment_and_its_config_on_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake");
        std::fs::write(
            &script,
            "#!/bin/sh\nconf=$(cat)\nprintf '{\"cmd\":\"%s\",\"id\":\"%s\",\"ns\":\"%s\",\"if\":\"%s\",\"args\":\"%s\",\"path\":\"%s\",\"conf\":%s}' \
             \"$CNI_COMMAND\" \"$CNI_CONTAINERID\" \"$CNI_NETNS\" \"$CNI_IFNAME\" \"$CNI_ARGS\" \"$CNI_PATH\" \"$conf\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let conf = json!({"type": "fake", "name": "n"});
        let call = Call {
            bin_dir: dir.path(),
            container_id: "c1",
            netns: Some(Path::new("/var/run/netns/x")),
            if_name: "eth0",
            args: "K8S_POD_NAME=p",
        };
        let got = exec(Op::Add, &conf, call).await.unwrap().unwrap();
        assert_eq!(got["cmd"], "ADD");
        assert_eq!(got["id"], "c1");
        assert_eq!(got["ns"], "/var/run/netns/x");
        assert_eq!(got["if"], "eth0");
        assert_eq!(got["args"], "K8S_POD_NAME=p");
        assert_eq!(got["path"], dir.path().to_str().unwrap());
        assert_eq!(got["conf"], conf);
        let del = exec(
            Op::Del,
            &conf,
            Call {
                netns: None,
                ..call
            },
        )
        .await
        .unwrap();
        assert_eq!(del, None);
    }

    #[tokio::test]
    async fn a_plugin_type_with_a_slash_is_refused() {
        let call = Call {
            bin_dir: Path::new("/usr/lib/cni"),
            container_id: "c1",
            netns: None,
            if_name: "eth0",
            args: "",
        };
        let err = exec(Op::Add, &json!({"type": "../bin/sh"}), call)
            .await
            .unwrap_err();
        assert!(matches!(err, NetworkError::PluginOutput { .. }), "{err}");
    }
}
