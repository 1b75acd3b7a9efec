//! Task exit and OOM events from containerd's event service.
//!
//! The Subscribe call only returns once the first event arrives (containerd sends no
//! response headers before that), so it runs in its own task and never inline, and the task
//! publishes marker events on a topic of its own until Subscribe returns: that proves the
//! subscription is registered. Then it reports [`RuntimeEvent::Resync`] — the first time and
//! after every re-subscription (e.g. containerd restarted) — so a consumer that relists on
//! Resync misses nothing. Event payloads come with a `type_url` lacking the leading `/` that
//! prost expects.

use std::time::Duration;

use containerd_client::events::{TaskExit, TaskOom};
use containerd_client::services::v1::events_client::EventsClient;
use containerd_client::services::v1::{PublishRequest, SubscribeRequest};
use containerd_client::tonic::Request;
use containerd_client::tonic::metadata::AsciiMetadataValue;
use containerd_client::tonic::transport::Channel;
use containerd_client::types::Envelope;
use futures::{Stream, StreamExt};
use jiff::Timestamp;
use prost_types::Any;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::containerd::{Connection, timestamp};
use super::{ContainerId, RuntimeEvent};

/// Topic of the marker events that confirm a subscription is live.
const SYNC_TOPIC: &str = "/berth/resync";

fn fixed(any: &Any) -> Any {
    let mut any = any.clone();
    if !any.type_url.starts_with('/') {
        any.type_url.insert(0, '/');
    }
    any
}

/// The event an envelope carries, if it is one we report.
fn decode(env: &Envelope) -> Option<RuntimeEvent> {
    let any = fixed(env.event.as_ref()?);
    match env.topic.as_str() {
        "/tasks/exit" => {
            let exit: TaskExit = any.to_msg().ok()?;
            // Exec processes exit too; only the container's main process counts.
            if exit.id != exit.container_id {
                return None;
            }
            Some(RuntimeEvent::TaskExit {
                id: ContainerId::new(exit.container_id).ok()?,
                code: exit.exit_status as i32,
                at: timestamp(exit.exited_at).unwrap_or_else(Timestamp::now),
            })
        }
        "/tasks/oom" => {
            let oom: TaskOom = any.to_msg().ok()?;
            Some(RuntimeEvent::TaskOom {
                id: ContainerId::new(oom.container_id).ok()?,
            })
        }
        _ => None,
    }
}

/// Publishes marker events until `done` resolves: they make a pending Subscribe return, which
/// proves the subscription is registered.
async fn publish_markers(channel: Channel, ns: AsciiMetadataValue) {
    loop {
        let mut client = EventsClient::new(channel.clone());
        let mut req = Request::new(PublishRequest {
            topic: SYNC_TOPIC.to_string(),
            event: Some(Any {
                type_url: "types.berth.io/resync".to_string(),
                value: Vec::new(),
            }),
        });
        req.metadata_mut()
            .insert("containerd-namespace", ns.clone());
        if let Err(e) = client.publish(req).await {
            tracing::debug!(error = %e.message(), "publishing the resync marker failed");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub(crate) fn subscribe(conn: &Connection) -> impl Stream<Item = RuntimeEvent> + Send + 'static {
    let channel = conn.channel.clone();
    let ns = conn.ns.clone();
    let namespace = conn.namespace().to_string();
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(async move {
        let filters: Vec<String> = ["/tasks/exit", "/tasks/oom", SYNC_TOPIC]
            .iter()
            .map(|topic| format!("namespace==\"{namespace}\",topic==\"{topic}\""))
            .collect();
        let mut failures = 0u32;
        loop {
            let mut client = EventsClient::new(channel.clone());
            let subscribed = tokio::select! {
                r = client.subscribe(Request::new(SubscribeRequest { filters: filters.clone() })) => r,
                () = publish_markers(channel.clone(), ns.clone()) => continue,
                () = tx.closed() => return,
            };
            if let Ok(resp) = subscribed {
                // Live from here on: whatever happened before, the consumer relists now.
                if tx.send(RuntimeEvent::Resync).await.is_err() {
                    return;
                }
                failures = 0;
                let mut stream = resp.into_inner();
                loop {
                    let item = tokio::select! {
                        item = stream.next() => item,
                        () = tx.closed() => return,
                    };
                    match item {
                        Some(Ok(env)) => {
                            if let Some(ev) = decode(&env)
                                && tx.send(ev).await.is_err()
                            {
                                return;
                            }
                        }
                        Some(Err(e)) => {
                            tracing::debug!(error = %e.message(), "containerd event stream broke");
                            break;
                        }
                        None => break,
                    }
                }
            }
            // Re-subscribe at once after a break, then back off while containerd is away.
            let pause = Duration::from_millis(100 * u64::from(failures.min(10)));
            failures += 1;
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = tx.closed() => return,
            }
        }
    });
    ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use prost_types::Any;

    use super::*;

    /// An envelope as containerd sends it: the type URL without its leading `/`.
    fn envelope(topic: &str, mut event: Any) -> Envelope {
        event.type_url = event.type_url.trim_start_matches('/').to_string();
        Envelope {
            timestamp: None,
            namespace: "t".into(),
            topic: topic.into(),
            event: Some(event),
        }
    }

    #[test]
    fn exits_of_main_processes_decode_and_exec_exits_are_skipped() {
        let exit = TaskExit {
            container_id: "c1".into(),
            id: "c1".into(),
            pid: 7,
            exit_status: 3,
            exited_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
        };
        let env = envelope("/tasks/exit", Any::from_msg(&exit).unwrap());
        assert_eq!(
            decode(&env),
            Some(RuntimeEvent::TaskExit {
                id: ContainerId::new("c1").unwrap(),
                code: 3,
                at: Timestamp::from_second(1_700_000_000).unwrap(),
            })
        );
        let exec_exit = TaskExit {
            id: "exec-1".into(),
            ..exit
        };
        let env = envelope("/tasks/exit", Any::from_msg(&exec_exit).unwrap());
        assert_eq!(decode(&env), None);
        let oom = TaskOom {
            container_id: "c1".into(),
        };
        let env = envelope("/tasks/oom", Any::from_msg(&oom).unwrap());
        assert_eq!(
            decode(&env),
            Some(RuntimeEvent::TaskOom {
                id: ContainerId::new("c1").unwrap()
            })
        );
    }
}
