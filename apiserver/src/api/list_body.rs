//! List bodies sent as they are made, in chunks: a JSON list splices its stored items into the
//! chunks as the connection takes them, and a Table's rows are rendered on a blocking thread
//! a couple of chunks ahead of the connection. Neither list is held whole in memory, and a
//! Table's rendering overlaps its sending instead of preceding it.

use super::error::ApiError;
use axum::body::Body;
use berth_shared::table::{IncludeObject, TableList};
use berth_store::StoredObject;
use bytes::Bytes;
use futures::StreamExt;
use std::convert::Infallible;

/// About how many bytes each chunk of a list body carries.
const CHUNK: usize = 256 * 1024;

/// Chunks a Table's renderer may run ahead of the connection.
const TABLE_AHEAD: usize = 2;

/// A JSON list: `head` (up to and including the `items` array's opening bracket), the stored
/// items comma-separated, the closing brackets and a newline.
pub fn json_list(head: String, items: Vec<StoredObject>) -> Body {
    let splice = Splice {
        head: Some(head.into_bytes()),
        items: items.into_iter(),
        first: true,
        done: false,
    };
    Body::from_stream(futures::stream::iter(splice))
}

/// The chunks of a JSON list, each about [`CHUNK`] bytes (an item is never split).
struct Splice {
    head: Option<Vec<u8>>,
    items: std::vec::IntoIter<StoredObject>,
    first: bool,
    done: bool,
}

impl Iterator for Splice {
    type Item = Result<Bytes, Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut chunk = self.head.take().unwrap_or_default();
        chunk.reserve(CHUNK);
        while chunk.len() < CHUNK {
            let Some(item) = self.items.next() else {
                chunk.extend_from_slice(b"]}\n");
                self.done = true;
                break;
            };
            if !std::mem::take(&mut self.first) {
                chunk.push(b',');
            }
            chunk.extend_from_slice(&item.data);
        }
        Some(Ok(Bytes::from(chunk)))
    }
}

/// A Table list of `kind` of the stored `items` (built-in kinds: see [`TableList`]), rows
/// carrying what `include` asks for, followed by a newline. The first chunk is rendered before
/// the answer starts, so a stored object that is not JSON there is still a 500; one found
/// later ends the body with an error (the client sees a truncated response), as a list
/// encoder failing mid-stream does upstream.
pub async fn table(
    kind: &'static str,
    include: IncludeObject,
    resource_version: String,
    cont: Option<String>,
    items: Vec<StoredObject>,
) -> Result<Body, ApiError> {
    let now = jiff::Timestamp::now();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(TABLE_AHEAD);
    tokio::task::spawn_blocking(move || {
        let list = TableList {
            kind,
            resource_version: Some(&resource_version),
            cont: cont.as_deref(),
            now,
            include,
        };
        let mut out = Vec::with_capacity(2 * CHUNK);
        let written = list.write_each(&mut out, items.iter().map(|i| &i.data[..]), |buf| {
            buf.len() < CHUNK
                || tx
                    .blocking_send(Ok(Bytes::from(std::mem::take(buf))))
                    .is_ok()
        });
        let last = match written {
            Ok(false) => return,
            Ok(true) => {
                out.push(b'\n');
                Ok(Bytes::from(out))
            }
            Err(e) => Err(std::io::Error::other(format!(
                "a stored {kind} is not JSON: {e}"
            ))),
        };
        // Nobody reading any more is fine: the client went away.
        let _ = tx.blocking_send(last);
    });
    let first = match rx.recv().await {
        Some(Ok(chunk)) => chunk,
        Some(Err(e)) => return Err(ApiError::Internal(e.to_string())),
        None => return Err(ApiError::Internal("the Table renderer stopped".to_string())),
    };
    let rest = tokio_stream::wrappers::ReceiverStream::new(rx);
    Ok(Body::from_stream(
        futures::stream::once(async move { Ok(first) }).chain(rest),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(n: usize, size: usize) -> Vec<StoredObject> {
        (0..n)
            .map(|i| StoredObject {
                revision: i as u64 + 1,
                data: Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(size))),
                index: Default::default(),
            })
            .collect()
    }

    async fn collect(body: Body) -> Vec<u8> {
        axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("body")
            .to_vec()
    }

    #[tokio::test]
    async fn a_json_list_is_its_items_spliced_in_chunks_never_splitting_one() {
        for (n, size) in [(0, 0), (1, 10), (3000, 300)] {
            let items = stored(n, size);
            let expected = format!(
                "{{\"items\":[{}]}}\n",
                items
                    .iter()
                    .map(|i| String::from_utf8_lossy(&i.data).into_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let splice = Splice {
                head: Some(b"{\"items\":[".to_vec()),
                items: items.clone().into_iter(),
                first: true,
                done: false,
            };
            let chunks: Vec<Bytes> = splice.map(|c| c.expect("chunk")).collect();
            assert_eq!(chunks.len(), expected.len() / CHUNK + 1, "{n} items");
            assert!(chunks.iter().all(|c| c.len() < CHUNK + size + 32));
            assert_eq!(chunks.concat(), expected.as_bytes());
            let body = json_list("{\"items\":[".to_string(), items);
            assert_eq!(collect(body).await, expected.as_bytes());
        }
    }
}
