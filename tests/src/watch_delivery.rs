//! Watch delivery latency, for the benchmarks: ConfigMaps are created one at a time in a
//! namespace while a watch opened beforehand reads the namespace's events; each write's latency
//! is from its create response to its ADDED event on the watch (zero when the event came
//! first).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

use crate::client::{AsyncApi, Req};
use crate::objects::configmap;
use crate::stats::Samples;

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    pub samples: Samples,
    /// Events that arrived before their write's response.
    pub early: usize,
    /// Writes whose event never arrived (within a minute of the last one).
    pub lost: usize,
}

impl Delivery {
    /// `p50 1.2 ms, p99 3.4 ms (n=1000 writes, 3 events arrived before the write's response, 0
    /// never arrived)`.
    pub fn describe(&mut self) -> String {
        let n = self.samples.len() + self.lost;
        format!(
            "{} (n={n} writes, {} events arrived before the write's response, {} never arrived)",
            self.samples.p50_p99_ms(),
            self.early,
            self.lost
        )
    }
}

/// Sends `req` and panics unless the answer is `status`; the answer's body.
pub async fn must(api: &AsyncApi, req: Req, status: u16) -> Value {
    let line = req.line();
    let reply = api
        .send(&req)
        .await
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    if reply.status != status {
        panic!("{line}: want {status}: {}", reply.describe());
    }
    reply.json_or_null()
}

/// Creates `writes` ConfigMaps named `<prefix>-NNNNN` in `namespace` (which must exist), `pause`
/// apart, and times each one's ADDED event on a watch opened before the first.
pub async fn measure(
    api: &AsyncApi,
    namespace: &str,
    prefix: &str,
    writes: usize,
    pause: Duration,
) -> Delivery {
    let collection = format!("/api/v1/namespaces/{namespace}/configmaps");
    let list = must(api, Req::get(&collection), 200).await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let path = format!("{collection}?watch=true&resourceVersion={from}");
    let resp = api
        .open(&Req::get(&path))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    if resp.status() != 200 {
        panic!("watch answered {}", resp.status());
    }
    let reader = tokio::spawn(async move {
        let mut arrivals: HashMap<String, Instant> = HashMap::new();
        let mut stream = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        while arrivals.len() < writes {
            let chunk = match tokio::time::timeout(Duration::from_secs(60), stream.next()).await {
                Ok(Some(Ok(chunk))) => chunk,
                _ => break,
            };
            let now = Instant::now();
            buf.extend_from_slice(&chunk);
            while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                if let Ok(event) = serde_json::from_slice::<Value>(&line)
                    && event["type"] == "ADDED"
                    && let Some(name) = event["object"]["metadata"]["name"].as_str()
                {
                    arrivals.insert(name.to_string(), now);
                }
            }
        }
        arrivals
    });

    let mut responses: Vec<(String, Instant)> = Vec::with_capacity(writes);
    for i in 0..writes {
        let name = format!("{prefix}-{i:05}");
        must(api, Req::post(&collection, &configmap(&name, &[])), 201).await;
        responses.push((name, Instant::now()));
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    let arrivals = reader.await.unwrap_or_else(|e| panic!("watch reader: {e}"));
    let mut out = Delivery::default();
    for (name, answered) in &responses {
        match arrivals.get(name) {
            Some(arrived) if arrived < answered => {
                out.early += 1;
                out.samples.push(Duration::ZERO);
            }
            Some(arrived) => out.samples.push(arrived.duration_since(*answered)),
            None => out.lost += 1,
        }
    }
    out
}
