//! Port-forward over a WebSocket, both ways upstream serves it. kubectl 1.31+ asks for
//! `SPDY/3.1+portforward.k8s.io` and speaks the SPDY protocol of `port_forward.rs` inside
//! binary messages (the "tunneling" upgrade). Other clients (the Python client) speak the
//! channel protocol `v4.channel.k8s.io` (or its base64 text form): the query names the ports
//! (`?ports=8080,9090`, or the kubelet's `port`), each port `i` gets the data channel `2i` and
//! the error channel `2i+1`, every message starts with its channel byte, and the server's first
//! message on each channel is the port, little-endian in two bytes. One TCP connection per
//! port; the socket closes once every port's connection has ended.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use axum::http::{HeaderMap, header};
use base64::Engine;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::PodNetwork;
use super::port_forward::{dial, forward};
use super::spdy::Session;

/// The WebSocket subprotocol of SPDY tunnelled through a WebSocket.
pub const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The channel protocol with binary messages.
pub const BINARY_PROTOCOL: &str = "v4.channel.k8s.io";
/// The channel protocol with text messages: the channel as a digit, the data in base64.
pub const BASE64_PROTOCOL: &str = "v4.base64.channel.k8s.io";
/// The channel protocols served, best first (a client naming none gets binary messages).
pub const CHANNEL_PROTOCOLS: [&str; 2] = [BINARY_PROTOCOL, BASE64_PROTOCOL];

/// The largest message of forwarded data sent.
const CHUNK: usize = 32 * 1024;

/// Whether a WebSocket request offers SPDY tunnelled through it.
pub fn offers_tunnel(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == TUNNEL_PROTOCOL)
}

/// The ports a channel-protocol request forwards: every `ports` (the API's option) and `port`
/// (the kubelet's) value, each a comma-separated list of numbers from 1 to 65535.
pub fn ports(query: &str) -> Result<Vec<u16>, String> {
    let mut ports = Vec::new();
    for kv in query.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        if k != "ports" && k != "port" {
            continue;
        }
        let v = percent_encoding::percent_decode_str(v).decode_utf8_lossy();
        if v.is_empty() {
            return Err(format!("query parameter {k:?} cannot be empty"));
        }
        for p in v.split(',') {
            match p.trim().parse::<u16>() {
                Ok(0) => return Err(format!("port {p:?} must be > 0")),
                Ok(n) => ports.push(n),
                Err(e) => return Err(format!("unable to parse {p:?} as a port: {e}")),
            }
        }
    }
    if ports.is_empty() {
        return Err("query parameter \"port\" is required".to_string());
    }
    Ok(ports)
}

/// SPDY inside the WebSocket's binary messages: the messages' bytes are the SPDY connection's.
pub async fn tunnel(socket: WebSocket, target: PodNetwork, pod: String) {
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    let session = Session::start(theirs);
    tokio::spawn(forward(session, target, pod));
    let (mut sink, mut messages) = socket.split();
    let (mut from_spdy, mut to_spdy) = tokio::io::split(ours);
    let outbound = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from_spdy.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let bytes = bytes::Bytes::copy_from_slice(&buf[..n]);
                    if sink.send(Message::Binary(bytes)).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = sink.send(normal_close()).await;
    };
    let inbound = async move {
        while let Some(Ok(message)) = messages.next().await {
            match message {
                Message::Binary(b) if to_spdy.write_all(&b).await.is_err() => break,
                Message::Close(_) => break,
                _ => {}
            }
        }
        // The client went: the SPDY session reads its end and closes.
        let _ = to_spdy.shutdown().await;
    };
    tokio::join!(outbound, inbound);
}

fn normal_close() -> Message {
    Message::Close(Some(CloseFrame {
        code: 1000,
        reason: "".into(),
    }))
}

/// A message on `channel`: binary, or in the base64 protocol the channel's digit and the data
/// in base64.
fn frame(base64: bool, channel: u8, data: &[u8]) -> Message {
    if base64 {
        let mut text = String::with_capacity(1 + data.len() * 4 / 3 + 4);
        text.push(char::from(b'0' + channel));
        base64::engine::general_purpose::STANDARD.encode_string(data, &mut text);
        Message::Text(text.into())
    } else {
        let mut bytes = Vec::with_capacity(1 + data.len());
        bytes.push(channel);
        bytes.extend_from_slice(data);
        Message::Binary(bytes.into())
    }
}

/// The channel and data of a client's message (`None`: not a data message).
fn unframe(message: Message) -> Option<(u8, Vec<u8>)> {
    match message {
        Message::Binary(b) => {
            let (&channel, data) = b.split_first()?;
            Some((channel, data.to_vec()))
        }
        Message::Text(t) => {
            let (digit, data) = t.as_str().split_at_checked(1)?;
            let channel = digit.parse::<u8>().ok()?;
            let data = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .ok()?;
            Some((channel, data))
        }
        _ => None,
    }
}

/// The channel protocol: one connection per port in the query.
pub async fn channels(
    socket: WebSocket,
    base64: bool,
    ports: Vec<u16>,
    target: PodNetwork,
    pod: String,
) {
    let (mut sink, mut messages) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<(u8, Vec<u8>)>(64);
    let writer = tokio::spawn(async move {
        while let Some((channel, data)) = outgoing.recv().await {
            if sink.send(frame(base64, channel, &data)).await.is_err() {
                return;
            }
        }
        let _ = sink.send(normal_close()).await;
    });
    let gone = CancellationToken::new();
    let mut inputs = Vec::with_capacity(ports.len());
    for (i, &port) in ports.iter().enumerate() {
        let Ok(data_channel) = u8::try_from(2 * i) else {
            break;
        };
        // Each channel's first message is its port.
        let _ = out.send((data_channel, port.to_le_bytes().to_vec())).await;
        let _ = out
            .send((data_channel + 1, port.to_le_bytes().to_vec()))
            .await;
        let (tx, rx) = mpsc::channel::<Vec<u8>>(64);
        inputs.push(tx);
        let forwarded = Forwarded {
            port,
            data_channel,
            out: out.clone(),
            gone: gone.clone(),
        };
        tokio::spawn(forwarded.run(rx, target.clone(), pod.clone()));
    }
    // The writer ends (and closes the socket) when the last port's connection ends.
    drop(out);
    while let Some(Ok(message)) = messages.next().await {
        if matches!(message, Message::Close(_)) {
            break;
        }
        let Some((channel, data)) = unframe(message) else {
            continue;
        };
        // Error channels are the server's to write; what a client sends on them is dropped.
        if channel % 2 == 1 || data.is_empty() {
            continue;
        }
        if let Some(tx) = inputs.get(usize::from(channel / 2)) {
            let _ = tx.send(data).await;
        }
    }
    // The client went: every connection to the pod ends.
    gone.cancel();
    drop(inputs);
    let _ = writer.await;
}

/// One port's connection to the pod.
struct Forwarded {
    port: u16,
    data_channel: u8,
    out: mpsc::Sender<(u8, Vec<u8>)>,
    gone: CancellationToken,
}

impl Forwarded {
    async fn run(self, mut input: mpsc::Receiver<Vec<u8>>, target: PodNetwork, pod: String) {
        let conn = match dial(&target.netns, self.port).await {
            Ok(c) => c,
            Err(e) => {
                let msg = format!(
                    "error forwarding port {} to pod {pod}, uid {}: {e}",
                    self.port, target.uid
                );
                tracing::info!(%pod, port = self.port, error = %e, "port-forward");
                let _ = self
                    .out
                    .send((self.data_channel + 1, msg.into_bytes()))
                    .await;
                return;
            }
        };
        let (mut from_pod, mut to_pod) = conn.into_split();
        let upstream = tokio::spawn(async move {
            while let Some(bytes) = input.recv().await {
                if to_pod.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            let _ = to_pod.shutdown().await;
        });
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = tokio::select! {
                r = from_pod.read(&mut buf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                },
                _ = self.gone.cancelled() => break,
            };
            if self
                .out
                .send((self.data_channel, buf[..n].to_vec()))
                .await
                .is_err()
            {
                break;
            }
        }
        upstream.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_every_ports_and_port_value() {
        assert_eq!(ports("ports=8080"), Ok(vec![8080]));
        assert_eq!(ports("ports=80,443&port=9090"), Ok(vec![80, 443, 9090]));
        assert_eq!(ports("ports=80%2C81"), Ok(vec![80, 81]));
        // A port is required, and a port is a number from 1 to 65535.
        for bad in ["", "ports=", "ports=0", "ports=http", "ports=70000"] {
            assert!(ports(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn frames_carry_their_channel_in_binary_and_in_base64() {
        assert_eq!(
            frame(false, 2, b"hi"),
            Message::Binary(vec![2, b'h', b'i'].into())
        );
        assert_eq!(frame(true, 1, b"hi"), Message::Text("1aGk=".into()));
        assert_eq!(
            unframe(Message::Binary(vec![0, 1, 2].into())),
            Some((0, vec![1, 2]))
        );
        assert_eq!(
            unframe(Message::Text("2aGk=".into())),
            Some((2, b"hi".to_vec()))
        );
        assert_eq!(unframe(Message::Binary(Vec::new().into())), None);
    }

    #[test]
    fn the_first_message_of_a_channel_is_its_port_little_endian() {
        assert_eq!(
            frame(false, 0, &8080u16.to_le_bytes()),
            Message::Binary(vec![0, 0x90, 0x1f].into())
        );
    }

    #[test]
    fn only_the_tunnelling_protocol_asks_for_spdy_inside() {
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            "v4.channel.k8s.io".parse().expect("header"),
        );
        assert!(!offers_tunnel(&h));
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            "SPDY/3.1+portforward.k8s.io, v4.channel.k8s.io"
                .parse()
                .expect("header"),
        );
        assert!(offers_tunnel(&h));
    }
}
