//! `GET /attach/{ns}/{pod}/{container}`: attach to a running container's main process over the
//! same channel protocol as exec ([`exec`](super::exec)) — its output from now on, the client's
//! stdin (for a container created with `stdin: true`), terminal resizes (with `tty: true`).
//! The session ends when the container's output ends (it exited), with a `Success` status as
//! the kubelet sends: attach carries no exit code, `kubectl run` reads it from the pod.

use super::exec::{Process, ProcessRequest, StreamParams, Target};

/// An attach request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachRequest {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// The attach a query asks for, or why not (the kubelet's 400 text) for one asking for no
/// stream (both transports).
pub(super) fn attach_request(
    (namespace, pod, container): (String, String, String),
    p: &StreamParams,
) -> Result<AttachRequest, &'static str> {
    if !p.stdin && !p.stdout && !p.stderr {
        return Err("you must specify at least 1 of stdin, stdout, stderr");
    }
    Ok(AttachRequest {
        namespace,
        pod,
        container,
        stdin: p.stdin,
        stdout: p.stdout,
        stderr: p.stderr,
    })
}

impl ProcessRequest for AttachRequest {
    fn process(target: Target, p: &StreamParams) -> Result<Process, &'static str> {
        attach_request(target, p).map(Process::Attach)
    }
}
