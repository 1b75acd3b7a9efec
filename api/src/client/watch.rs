//! A watch stream: newline-delimited watch events decoded one at a time.

use super::ClientError;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::marker::PhantomData;

/// One watch event.
#[derive(Debug, Clone)]
pub enum WatchEvent<T> {
    Added(T),
    Modified(T),
    Deleted(T),
    /// Progress notification: the resourceVersion the watch has reached.
    Bookmark(String),
}

/// The events of one watch request; `next` returns `None` when the server ends the stream.
pub struct WatchStream<T> {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: Vec<u8>,
    _t: PhantomData<T>,
}

impl<T: DeserializeOwned> WatchStream<T> {
    pub(super) fn new(resp: reqwest::Response) -> WatchStream<T> {
        WatchStream {
            body: resp.bytes_stream().boxed(),
            buf: Vec::new(),
            _t: PhantomData,
        }
    }

    fn decode(line: &[u8]) -> Result<WatchEvent<T>, ClientError> {
        let v: Value = serde_json::from_slice(line).map_err(ClientError::Decode)?;
        let obj = v.get("object").cloned().unwrap_or(Value::Null);
        match v.get("type").and_then(Value::as_str) {
            Some("ADDED") => Ok(WatchEvent::Added(
                serde_json::from_value(obj).map_err(ClientError::Decode)?,
            )),
            Some("MODIFIED") => Ok(WatchEvent::Modified(
                serde_json::from_value(obj).map_err(ClientError::Decode)?,
            )),
            Some("DELETED") => Ok(WatchEvent::Deleted(
                serde_json::from_value(obj).map_err(ClientError::Decode)?,
            )),
            Some("BOOKMARK") => Ok(WatchEvent::Bookmark(
                obj.pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )),
            Some("ERROR") => Err(ClientError::Api {
                code: obj["code"].as_u64().unwrap_or(500) as u16,
                reason: obj["reason"].as_str().unwrap_or_default().to_string(),
                message: obj["message"].as_str().unwrap_or_default().to_string(),
            }),
            other => Err(ClientError::Watch(format!("unknown event type {other:?}"))),
        }
    }

    /// The next event; `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Result<WatchEvent<T>, ClientError>> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let line = &line[..line.len() - 1];
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(Self::decode(line));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(e)) => return Some(Err(ClientError::Http(e))),
                None => {
                    if self.buf.iter().all(u8::is_ascii_whitespace) {
                        return None;
                    }
                    let line = std::mem::take(&mut self.buf);
                    return Some(Self::decode(&line));
                }
            }
        }
    }
}
