//! Watch streams: newline-delimited `{"type","object"}` events from a resourceVersion (or the
//! current state as synthetic ADDED events first), filtered by namespace and selectors with
//! upstream's transitions (an object leaving the selector is DELETED for this watcher),
//! optional bookmarks, `timeoutSeconds`, and 410 Expired for compacted revisions.

use super::error::ApiError;
use super::list::Selectors;
use super::query::Query;
use super::watch_start::{self, Freshness, WatchStart};
use super::{SharedState, table};
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_registry::prefix;
use berth_shared::resource::ResourceType;
use berth_shared::table::IncludeObject;
use berth_store::{EventType, StoreEvent, StoredObject};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

struct Encoder {
    /// The version watched (its objects may be stored as another version).
    rt: &'static ResourceType,
    table: Option<IncludeObject>,
    columns_sent: bool,
    /// Calls conversion webhooks.
    registry: berth_registry::Registry,
}

impl Encoder {
    /// One event's line; `Err` when the object could not be converted to the version watched
    /// (its conversion webhook failed).
    async fn line(&mut self, event_type: &str, obj: &StoredObject) -> Result<Bytes, ApiError> {
        let converted = super::conversion::is_converted(self.rt);
        let mut out = Vec::with_capacity(obj.data.len() + 32);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(event_type.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        if self.table.is_some() || converted {
            match obj.value() {
                Ok(v) => {
                    // Stored as another version: each object converted to the one watched.
                    let v = if converted {
                        super::conversion::object_in_version(&self.registry, self.rt, v).await?
                    } else {
                        v
                    };
                    if let Some(include) = self.table {
                        let mut t = table::render_one(self.rt, &v, include);
                        if self.columns_sent {
                            t["columnDefinitions"] = serde_json::json!([]);
                        }
                        self.columns_sent = true;
                        out.extend_from_slice(t.to_string().as_bytes());
                    } else {
                        out.extend_from_slice(v.to_string().as_bytes());
                    }
                }
                Err(_) => out.extend_from_slice(&obj.data),
            }
        } else {
            out.extend_from_slice(&obj.data);
        }
        out.extend_from_slice(b"}\n");
        Ok(Bytes::from(out))
    }

    /// Sends one event; false once the stream is over: the client is gone, or the object could
    /// not be converted and an ERROR event carrying why was sent instead (upstream ends the
    /// stream there too).
    async fn send(
        &mut self,
        tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
        event_type: &str,
        obj: &StoredObject,
    ) -> bool {
        match self.line(event_type, obj).await {
            Ok(line) => tx.send(Ok(line)).await.is_ok(),
            Err(e) => {
                let _ = tx.send(Ok(error_line(&e))).await;
                false
            }
        }
    }
}

fn error_line(e: &ApiError) -> Bytes {
    Bytes::from(format!(
        "{{\"type\":\"ERROR\",\"object\":{}}}\n",
        e.status()
    ))
}

/// What a watcher sees of a store event, after selector transitions.
fn visible(event: &StoreEvent, prefix: &str, sel: &Selectors) -> Option<&'static str> {
    if !event.key.starts_with(prefix) {
        return None;
    }
    let now = sel.matches(&event.object);
    let before = event
        .prev_index
        .as_ref()
        .map(|p| sel.matches_parts(p, event.prev_data.as_deref()));
    match (event.event_type, before, now) {
        (EventType::Deleted, Some(true) | None, true) => Some("DELETED"),
        (EventType::Deleted, Some(true), false) => Some("DELETED"),
        (EventType::Deleted, _, _) => None,
        (EventType::Added, _, true) => Some("ADDED"),
        (EventType::Added, _, false) => None,
        (EventType::Modified, Some(true) | None, true) => Some("MODIFIED"),
        (EventType::Modified, Some(false), true) => Some("ADDED"),
        (EventType::Modified, Some(true), false) => Some("DELETED"),
        (EventType::Modified, _, false) => None,
    }
}

pub async fn serve(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    q: &Query,
    as_table: Option<IncludeObject>,
) -> Result<Response, ApiError> {
    let selectors = Selectors::from_query(q, rt)?;
    let prefix = prefix(rt, ns);
    let store = state.registry.store().clone();
    let mut enc = Encoder {
        rt,
        table: as_table,
        columns_sent: false,
        registry: state.registry.clone(),
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);

    let start = watch_start::watch_start(q)?;
    let mut initial = Vec::new();
    let (start_rev, watch) = match start {
        WatchStart::ChangesAfter(rv) | WatchStart::ChangesOnly(Freshness::NotOlderThan(rv)) => {
            (rv, store.watch(rv))
        }
        WatchStart::ChangesOnly(fresh) => {
            let rev = super::list::reach(&store, fresh).await?;
            (rev, store.watch(rev))
        }
        WatchStart::StateThenChanges | WatchStart::StreamedList(_) => {
            if let WatchStart::StreamedList(fresh) = start {
                super::list::reach(&store, fresh).await?;
            }
            let (rev, items, _) = store.list(&prefix, None, None, |o| selectors.matches(o));
            for item in items {
                // A conversion failing before the stream starts is the request's error.
                initial.push(enc.line("ADDED", &item).await?);
            }
            if let WatchStart::StreamedList(_) = start {
                initial.push(Bytes::from(watch_start::initial_events_end(
                    rt.kind,
                    &rt.api_version(),
                    rev,
                )));
            }
            (rev, store.watch(rev))
        }
    };
    let watch = match watch {
        Ok(w) => w,
        Err(e) => {
            // Upstream answers a watch from a compacted revision with a 200 stream whose only
            // event is an ERROR carrying the 410 Expired status.
            let line = error_line(&ApiError::from(e));
            return Ok((
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                line,
            )
                .into_response());
        }
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let timeout = q.timeout_seconds().map(Duration::from_secs);
    let shutdown = state.shutdown.clone();
    let metrics = state.metrics.clone();
    tokio::spawn(async move {
        metrics.watch_started();
        let _guard = scopeguard(move || metrics.watch_ended());
        for line in initial {
            if tx.send(Ok(line)).await.is_err() {
                return;
            }
        }
        let mut last_rev = start_rev;
        for ev in watch.backlog {
            last_rev = ev.revision;
            if let Some(t) = visible(&ev, &prefix, &selectors)
                && !enc.send(&tx, t, &ev.object).await
            {
                return;
            }
        }
        let mut live = watch.live;
        let deadline = watch_deadline(tokio::time::Instant::now(), timeout);
        let mut bookmark = tokio::time::interval(BOOKMARK_EVERY);
        bookmark.tick().await;
        loop {
            let next = tokio::select! {
                r = live.recv() => r,
                _ = shutdown.cancelled() => return,
                _ = tx.closed() => return,
                _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => return,
                _ = bookmark.tick(), if bookmarks => {
                    // A bookmark promises that every event up to its version was sent: the
                    // store's revision only once this watcher has taken every event published
                    // up to it (publication and the revision move under one lock), else the
                    // last one it took. A client resuming from it then misses nothing.
                    let current = store.current_revision();
                    let rev = if live.is_empty() { last_rev.max(current) } else { last_rev };
                    let line = format!(
                        "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"}}}}}}\n",
                        rt.kind, rt.api_version(), rev
                    );
                    if tx.send(Ok(Bytes::from(line))).await.is_err() { return; }
                    continue;
                }
            };
            let ev: Arc<StoreEvent> = match next {
                Ok(ev) => ev,
                // Fallen behind the live ring: catch up from the store's history, or, if that no
                // longer reaches back far enough, end with 410 Expired so the client relists.
                Err(broadcast::error::RecvError::Lagged(_)) => match store.watch(last_rev) {
                    Ok(resumed) => {
                        for ev in resumed.backlog {
                            last_rev = ev.revision;
                            if let Some(t) = visible(&ev, &prefix, &selectors)
                                && !enc.send(&tx, t, &ev.object).await
                            {
                                return;
                            }
                        }
                        live = resumed.live;
                        continue;
                    }
                    Err(e) => {
                        let _ = tx.send(Ok(error_line(&ApiError::from(e)))).await;
                        return;
                    }
                },
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if ev.revision <= last_rev {
                continue;
            }
            last_rev = ev.revision;
            if let Some(t) = visible(&ev, &prefix, &selectors)
                && !enc.send(&tx, t, &ev.object).await
            {
                return;
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache, private"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Runs `f` when dropped.
/// When a watch with `timeoutSeconds` ends; none for no timeout, and none for one past what
/// the clock can represent (`timeoutSeconds=18446744073709551615` once panicked the stream).
fn watch_deadline(
    now: tokio::time::Instant,
    timeout: Option<Duration>,
) -> Option<tokio::time::Instant> {
    timeout.and_then(|t| now.checked_add(t))
}

fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_past_the_clocks_range_means_no_deadline() {
        let now = tokio::time::Instant::now();
        assert_eq!(
            watch_deadline(now, Some(Duration::from_secs(30))),
            Some(now + Duration::from_secs(30))
        );
        assert_eq!(watch_deadline(now, None), None);
        // The largest value upstream's int64 conversion accepts (a larger one is a 400).
        let q = Query::parse(Some("timeoutSeconds=9223372036854775807"));
        let huge = q.timeout_seconds().map(Duration::from_secs);
        assert_eq!(huge, Some(Duration::from_secs(i64::MAX.unsigned_abs())));
        assert_eq!(watch_deadline(now, huge), None);
    }
}
