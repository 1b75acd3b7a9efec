//! List bodies sent as they are made, in chunks: a JSON list splices its stored items into the
//! chunks as the connection takes them, and a Table's rows are rendered in blocks on a blocking
//! thread per core, a couple of blocks ahead of the connection. Neither list is held whole in
//! memory, and a Table's rendering is spread over the cores and overlaps its sending.

use super::error::ApiError;
use axum::body::Body;
use berth_shared::table::{IncludeObject, TableList};
use berth_store::StoredObject;
use bytes::Bytes;
use futures::StreamExt;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc;

/// About how many bytes each chunk of a JSON list body carries.
const CHUNK: usize = 256 * 1024;

/// Rows in each block of a Table, the unit its renderers take in turn and the chunk it is sent
/// in (a pod's row is about 1.6 KB).
const BLOCK_ROWS: usize = 256;

/// The most renderers one Table list runs at once (at most one per core).
const MAX_RENDERERS: usize = 4;

/// Blocks each renderer may run ahead of the connection.
const BLOCKS_AHEAD: usize = 2;

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
/// carrying what `include` asks for, followed by a newline. The rows are rendered in blocks of
/// [`BLOCK_ROWS`] by one blocking thread per core (up to [`MAX_RENDERERS`]), each taking every
/// n-th block and running at most [`BLOCKS_AHEAD`] blocks ahead of the connection, which sends
/// the blocks in order. The first block is rendered before the answer starts, so a stored object
/// that is not JSON there is still a 500; one found later ends the body with an error (the
/// client sees a truncated response), as a list encoder failing mid-stream does upstream.
pub async fn table(
    kind: &'static str,
    include: IncludeObject,
    resource_version: String,
    cont: Option<String>,
    items: Vec<StoredObject>,
) -> Result<Body, ApiError> {
    let table = Arc::new(TableBlocks {
        kind,
        include,
        resource_version,
        cont,
        now: jiff::Timestamp::now(),
        items,
    });
    let blocks = table.blocks();
    let renderers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_RENDERERS)
        .min(blocks);
    let mut receivers = Vec::with_capacity(renderers);
    for first in 0..renderers {
        let (tx, rx) = mpsc::channel(BLOCKS_AHEAD);
        receivers.push(rx);
        let table = Arc::clone(&table);
        tokio::task::spawn_blocking(move || table.render_every(first, renderers, &tx));
    }
    let mut chunks = Box::pin(in_order(receivers, blocks));
    // `in_order` yields at least one block (there is always one) or an error.
    let first = chunks
        .next()
        .await
        .unwrap_or_else(|| Err(std::io::Error::other("no Table block")))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Body::from_stream(
        futures::stream::once(async move { Ok(first) }).chain(chunks),
    ))
}

/// A Table list being rendered: what each of its blocks is made from.
struct TableBlocks {
    kind: &'static str,
    include: IncludeObject,
    resource_version: String,
    cont: Option<String>,
    now: jiff::Timestamp,
    items: Vec<StoredObject>,
}

type Chunk = Result<Bytes, std::io::Error>;

impl TableBlocks {
    /// How many blocks the rows make (one for an empty list).
    fn blocks(&self) -> usize {
        self.items.len().div_ceil(BLOCK_ROWS).max(1)
    }

    /// Block `b`: the Table's opening before the first block's rows, its closing and a newline
    /// after the last one's.
    fn block(&self, b: usize) -> Chunk {
        let list = TableList {
            kind: self.kind,
            resource_version: Some(&self.resource_version),
            cont: self.cont.as_deref(),
            now: self.now,
            include: self.include,
        };
        let len = self.items.len();
        let rows = &self.items[(b * BLOCK_ROWS).min(len)..((b + 1) * BLOCK_ROWS).min(len)];
        let mut out = Vec::with_capacity(1024 + rows.iter().map(|i| i.data.len()).sum::<usize>());
        let written = if b == 0 {
            list.write_head(&mut out)
        } else {
            Ok(())
        }
        .and_then(|()| list.write_rows(&mut out, rows.iter().map(|i| &i.data[..]), b == 0));
        if let Err(e) = written {
            let kind = self.kind;
            return Err(std::io::Error::other(format!(
                "a stored {kind} is not JSON: {e}"
            )));
        }
        if b + 1 == self.blocks() {
            TableList::write_tail(&mut out);
            out.push(b'\n');
        }
        Ok(Bytes::from(out))
    }

    /// Renders blocks `first`, `first + step`, … into `tx` until they run out, one fails or
    /// nobody reads any more (the client went away).
    fn render_every(&self, first: usize, step: usize, tx: &mpsc::Sender<Chunk>) {
        for b in (first..self.blocks()).step_by(step) {
            let block = self.block(b);
            let failed = block.is_err();
            if tx.blocking_send(block).is_err() || failed {
                return;
            }
        }
    }
}

/// The `blocks` blocks in order, block `b` from `receivers[b % receivers.len()]`; ends after
/// the first error, or with one if a renderer stopped short.
fn in_order(
    receivers: Vec<mpsc::Receiver<Chunk>>,
    blocks: usize,
) -> impl futures::Stream<Item = Chunk> {
    futures::stream::unfold((receivers, 0), move |(mut receivers, b)| async move {
        if b >= blocks {
            return None;
        }
        let n = receivers.len();
        let block = receivers[b % n]
            .recv()
            .await
            .unwrap_or_else(|| Err(std::io::Error::other("a Table renderer stopped")));
        let next = if block.is_ok() { b + 1 } else { blocks };
        Some((block, (receivers, next)))
    })
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

    fn pods(n: usize) -> Vec<StoredObject> {
        (0..n)
            .map(|i| StoredObject {
                revision: i as u64 + 1,
                data: Bytes::from(format!(
                    r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p-{i}","namespace":"default"}},"spec":{{"containers":[{{"name":"c"}}]}},"status":{{"phase":"Running"}}}}"#
                )),
                index: Default::default(),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_table_rendered_in_blocks_is_the_table_written_at_once() {
        for n in [0, 1, BLOCK_ROWS, 3 * BLOCK_ROWS + 5] {
            let items = pods(n);
            let mut whole = Vec::new();
            berth_shared::table::write_table(
                &mut whole,
                "Pod",
                items.iter().map(|i| &i.data[..]),
                Some("42"),
                Some("next"),
                jiff::Timestamp::now(),
                IncludeObject::Metadata,
            )
            .expect("write");
            whole.push(b'\n');
            let body = table(
                "Pod",
                IncludeObject::Metadata,
                "42".to_string(),
                Some("next".to_string()),
                items,
            )
            .await
            .expect("table");
            assert_eq!(collect(body).await, whole, "{n} pods");
        }
    }

    #[tokio::test]
    async fn a_bad_object_is_a_500_in_the_first_block_and_a_cut_body_later() {
        let mut items = pods(3 * BLOCK_ROWS);
        items[3].data = Bytes::from_static(b"nope");
        let first = table("Pod", IncludeObject::None, "1".into(), None, items).await;
        assert!(matches!(first, Err(ApiError::Internal(_))));

        let mut items = pods(3 * BLOCK_ROWS);
        items[2 * BLOCK_ROWS + 1].data = Bytes::from_static(b"nope");
        let body = table("Pod", IncludeObject::None, "1".into(), None, items)
            .await
            .expect("the first block is fine");
        assert!(axum::body::to_bytes(body, usize::MAX).await.is_err());
    }
}
