//! `GET /containerLogs/{ns}/{pod}/{container}`: `follow`, `tailLines`, `sinceSeconds`,
//! `sinceTime`, `timestamps`, `previous`, `limitBytes`, as the kubelet serves them.

use super::log_follow::LogFollower;
use super::{SharedBackend, cri_log, log_history};
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LogQuery {
    follow: Option<String>,
    tail_lines: Option<usize>,
    since_seconds: Option<i64>,
    since_time: Option<String>,
    timestamps: Option<String>,
    previous: Option<String>,
    limit_bytes: Option<usize>,
}

fn flag(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("true") | Some("1"))
}

const POLL: Duration = Duration::from_millis(100);

pub async fn serve(
    State(backend): State<SharedBackend>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    Query(q): Query<LogQuery>,
) -> Response {
    let target = match backend.log_target(&ns, &pod, &container, flag(&q.previous)) {
        Ok(t) => t,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let since = match (&q.since_time, q.since_seconds) {
        (Some(t), _) => t.parse::<jiff::Timestamp>().ok(),
        (None, Some(s)) => Some(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(s)),
        _ => None,
    };
    let timestamps = flag(&q.timestamps);
    let mut follower = LogFollower::new(target.path.clone());
    let live = follower.read_new().await;
    // The rotated files first (the live file's inode: a rotation since it was opened must
    // not show its text twice).
    let (path, inode, tail) = (target.path.clone(), follower.inode(), q.tail_lines);
    let live_lines = live.lines().count();
    let history = tokio::task::spawn_blocking(move || {
        log_history::read_history(&path, inode, tail, since, live_lines)
    })
    .await
    .unwrap_or_default();
    let content = history + &live;
    let mut first = cri_log::select(&content, since, q.tail_lines, timestamps);
    if let Some(limit) = q.limit_bytes
        && first.len() > limit
    {
        let mut cut = limit;
        while !first.is_char_boundary(cut) {
            cut -= 1;
        }
        first.truncate(cut);
    }
    if !flag(&q.follow) {
        return ([(header::CONTENT_TYPE, "text/plain")], first).into_response();
    }
    // Follow: what was there, then what is appended (across rotations), until the container
    // stops. Chunk by chunk: a full chunk is read on at once, only an idle file is polled.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let running = target.running.clone();
    tokio::spawn(async move {
        if tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let alive = running();
            let appended = follower.read_chunk().await;
            pending.extend_from_slice(&appended);
            // Only whole lines are rendered; a line still being written waits for its end.
            if let Some(end) = pending.iter().rposition(|b| *b == b'\n') {
                let rest = pending.split_off(end + 1);
                let complete = std::mem::replace(&mut pending, rest);
                let out =
                    cri_log::select(&String::from_utf8_lossy(&complete), None, None, timestamps);
                if !out.is_empty() && tx.send(Ok(Bytes::from(out))).await.is_err() {
                    return;
                }
            }
            if !appended.is_empty() {
                continue;
            }
            if !alive {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = tx.closed() => return,
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
        .into_response()
}
