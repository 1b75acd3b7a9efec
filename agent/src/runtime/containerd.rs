//! The containerd connection: connect with retries and a version check, namespaced requests,
//! the gRPC clients and the error mapping shared by the other `containerd_*` files.
//!
//! Every request carries the `containerd-namespace` header (and `containerd-lease` where a
//! lease protects new content). The lifecycle calls are in `containerd_lifecycle.rs`, state
//! and listing in `containerd_state.rs`, exec, events and content in their own files.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use containerd_client::services::v1::snapshots::RemoveSnapshotRequest;
use containerd_client::services::v1::{Container, GetContainerRequest};
use containerd_client::tonic::metadata::{AsciiMetadataValue, MetadataValue};
use containerd_client::tonic::transport::Channel;
use containerd_client::tonic::{Code, Request, Response, Status};
use jiff::Timestamp;

use super::attach::AttachPoint;
use super::logs::Copier;
use super::{RuntimeError, RuntimeOptions};

/// The connection plus the per-process state shared by all clones of a `Runtime`.
pub(crate) struct Connection {
    pub(crate) channel: Channel,
    pub(crate) ns: AsciiMetadataValue,
    pub(crate) opts: RuntimeOptions,
    /// The log copier of each container this process started or adopted.
    pub(crate) copiers: Mutex<HashMap<String, Copier>>,
    /// The OCI `process` object of each container's spec, the base of its execs.
    pub(crate) exec_bases: Mutex<HashMap<String, serde_json::Value>>,
    /// Where clients attach to each container whose output this process copies.
    pub(crate) attach_points: Mutex<HashMap<String, std::sync::Arc<AttachPoint>>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The copiers belong to this connection: a fresh Runtime (after an agent restart, or
        // in a test simulating one) adopts the containers and copies their output itself.
        if let Ok(copiers) = self.copiers.lock() {
            for c in copiers.values() {
                c.abort();
            }
        }
    }
}

/// A call's answer, or `None` where containerd has no such object: for the reads, and the
/// deletes, to which absent is an answer. Other failures map as [`grpc_error`] does.
pub(crate) fn found<T>(
    answer: Result<Response<T>, Status>,
    op: &'static str,
    what: &str,
) -> Result<Option<T>, RuntimeError> {
    match answer {
        Ok(r) => Ok(Some(r.into_inner())),
        Err(s) if s.code() == Code::NotFound => Ok(None),
        Err(s) => Err(grpc_error(op, what, s)),
    }
}

/// Maps a gRPC status to a runtime error; `what` names the object for NotFound/AlreadyExists.
pub(crate) fn grpc_error(op: &'static str, what: &str, status: Status) -> RuntimeError {
    let message = status.message().to_string();
    match status.code() {
        Code::NotFound => RuntimeError::NotFound {
            what: format!("{what} ({op}: {message})"),
        },
        Code::AlreadyExists => RuntimeError::AlreadyExists {
            what: what.to_string(),
        },
        code => RuntimeError::Containerd {
            op,
            message: format!("{code:?}: {message}"),
            // tonic reports a broken connection as Unknown "transport error"; other
            // Unknowns are containerd's own failures (e.g. runc refusing a spec).
            transient: matches!(
                code,
                Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::Aborted
                    | Code::ResourceExhausted
                    | Code::Cancelled
            ) || (code == Code::Unknown && message.contains("transport error")),
        },
    }
}

pub(crate) fn timestamp(ts: Option<prost_types::Timestamp>) -> Option<Timestamp> {
    let ts = ts?;
    if ts.seconds <= 0 && ts.nanos <= 0 {
        return None;
    }
    Timestamp::new(ts.seconds, ts.nanos).ok()
}

/// Parses `1.6.20~ds1` / `v1.7.0` into (major, minor).
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let v = version.trim_start_matches('v');
    let mut parts = v.split(['.', '-', '~', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

pub(crate) fn label_bool(labels: &HashMap<String, String>, key: &str) -> bool {
    labels.get(key).is_some_and(|v| v == "true")
}

impl Connection {
    pub(crate) async fn connect(opts: RuntimeOptions) -> Result<Connection, RuntimeError> {
        let ns: AsciiMetadataValue =
            MetadataValue::try_from(opts.namespace.as_str()).map_err(|_| {
                RuntimeError::InvalidConfig(format!(
                    "invalid containerd namespace {:?}",
                    opts.namespace
                ))
            })?;
        let socket = opts.socket.display().to_string();
        let deadline = tokio::time::Instant::now() + opts.connect_timeout;
        let channel = loop {
            match containerd_client::connect(&opts.socket).await {
                Ok(channel) => break channel,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(RuntimeError::Connect {
                        socket,
                        message: format!("{e:?}"),
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let conn = Connection {
            channel,
            ns,
            opts,
            copiers: Mutex::new(HashMap::new()),
            attach_points: Mutex::new(HashMap::new()),
            exec_bases: Mutex::new(HashMap::new()),
        };
        let version = conn.version().await?;
        match major_minor(&version) {
            Some((major, minor)) if (major, minor) >= (1, 6) => Ok(conn),
            _ => Err(RuntimeError::UnsupportedVersion { version }),
        }
    }

    pub(crate) fn namespace(&self) -> &str {
        &self.opts.namespace
    }

    /// A request in this connection's namespace.
    pub(crate) fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        r.metadata_mut()
            .insert("containerd-namespace", self.ns.clone());
        r
    }

    /// A request in this namespace under `lease`.
    pub(crate) fn req_lease<T>(&self, msg: T, lease: &str) -> Result<Request<T>, RuntimeError> {
        let mut r = self.req(msg);
        let value: AsciiMetadataValue = MetadataValue::try_from(lease)
            .map_err(|_| RuntimeError::InvalidConfig(format!("invalid lease id {lease:?}")))?;
        r.metadata_mut().insert("containerd-lease", value);
        Ok(r)
    }

    pub(crate) fn tasks(
        &self,
    ) -> containerd_client::services::v1::tasks_client::TasksClient<Channel> {
        containerd_client::services::v1::tasks_client::TasksClient::new(self.channel.clone())
    }

    pub(crate) fn containers(
        &self,
    ) -> containerd_client::services::v1::containers_client::ContainersClient<Channel> {
        containerd_client::services::v1::containers_client::ContainersClient::new(
            self.channel.clone(),
        )
    }

    pub(crate) fn snapshots(
        &self,
    ) -> containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient<Channel>
    {
        containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient::new(
            self.channel.clone(),
        )
    }

    pub(crate) async fn version(&self) -> Result<String, RuntimeError> {
        let mut client = containerd_client::services::v1::version_client::VersionClient::new(
            self.channel.clone(),
        );
        let resp = client
            .version(Request::new(()))
            .await
            .map_err(|s| grpc_error("version", "version", s))?;
        Ok(resp.into_inner().version)
    }

    pub(crate) async fn snapshotter_root(&self) -> Result<Option<String>, RuntimeError> {
        use containerd_client::services::v1::PluginsRequest;
        use containerd_client::services::v1::introspection_client::IntrospectionClient;
        let filter = format!(
            "type==io.containerd.snapshotter.v1,id=={}",
            self.opts.snapshotter
        );
        let resp = IntrospectionClient::new(self.channel.clone())
            .plugins(Request::new(PluginsRequest {
                filters: vec![filter],
            }))
            .await
            .map_err(|s| grpc_error("introspect", "plugins", s))?;
        Ok(resp
            .into_inner()
            .plugins
            .into_iter()
            .find_map(|p| p.exports.get("root").cloned()))
    }

    pub(crate) async fn get_container(&self, id: &str) -> Result<Container, RuntimeError> {
        let what = format!("container {id}");
        self.containers()
            .get(self.req(GetContainerRequest { id: id.to_string() }))
            .await
            .map_err(|s| grpc_error("get container", &what, s))?
            .into_inner()
            .container
            .ok_or(RuntimeError::NotFound { what })
    }

    pub(crate) async fn remove_snapshot(&self, key: &str) {
        let removed = self
            .snapshots()
            .remove(self.req(RemoveSnapshotRequest {
                snapshotter: self.opts.snapshotter.clone(),
                key: key.to_string(),
            }))
            .await;
        if let Err(s) = removed
            && s.code() != Code::NotFound
        {
            tracing::warn!(key, error = %s.message(), "removing snapshot failed");
        }
    }

    pub(crate) fn stdio_dir(&self, id: &str) -> PathBuf {
        self.opts.state_dir.join(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_to_major_minor() {
        for (version, want) in [
            ("1.6.20~ds1", Some((1, 6))),
            ("v1.7.13", Some((1, 7))),
            ("2.0.0-rc.1", Some((2, 0))),
            ("garbage", None),
        ] {
            assert_eq!(major_minor(version), want, "{version}");
        }
    }
}
