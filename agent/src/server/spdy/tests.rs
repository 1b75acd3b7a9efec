//! A session driven by a client written from the frames up, over an in-memory pipe.

use super::*;
use flate2::{Compress, Compression, FlushCompress};
use std::time::Duration;

/// A header block as Go's framer writes one: compressed with the preset dictionary.
struct ClientHeaders(Compress);

impl ClientHeaders {
    fn new() -> ClientHeaders {
        let mut c = Compress::new(Compression::default(), true);
        c.set_dictionary(&headers_dictionary()).expect("dictionary");
        ClientHeaders(c)
    }

    fn block(&mut self, pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut plain = (pairs.len() as u32).to_be_bytes().to_vec();
        for (n, v) in pairs {
            for part in [n, v] {
                plain.extend_from_slice(&(part.len() as u32).to_be_bytes());
                plain.extend_from_slice(part.as_bytes());
            }
        }
        let mut out = Vec::with_capacity(plain.len() + 1024);
        self.0
            .compress_vec(&plain, &mut out, FlushCompress::Sync)
            .expect("compresses");
        out
    }
}

fn headers_dictionary() -> Vec<u8> {
    // The codec's own dictionary is private; a session round trip with a dictionary-seeded
    // client proves the two agree (a wrong one fails the first SYN_STREAM).
    headers::tests_dictionary()
}

async fn read_frame(r: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> Frame {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((f, n)) = frame::parse(buf).expect("parses") {
            buf.drain(..n);
            return f;
        }
        let n = tokio::time::timeout(Duration::from_secs(5), r.read(&mut chunk))
            .await
            .expect("a frame within 5 s")
            .expect("reads");
        assert!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn streams_are_accepted_replied_to_and_carry_data_both_ways() {
    let (client, server) = tokio::io::duplex(1 << 20);
    let mut session = Session::start(server);
    let (mut cr, mut cw) = tokio::io::split(client);
    let mut ch = ClientHeaders::new();
    let mut buf = Vec::new();

    // An error stream the client half-closes at once, and a data stream.
    let syn = |stream, flags, headers| {
        frame::encode(&Frame::SynStream {
            stream,
            flags,
            headers,
        })
    };
    let error_headers = ch.block(&[("streamtype", "error"), ("port", "80"), ("requestid", "0")]);
    cw.write_all(&syn(1, FLAG_FIN, error_headers))
        .await
        .expect("writes");
    let data_headers = ch.block(&[("streamtype", "data"), ("port", "80"), ("requestid", "0")]);
    cw.write_all(&syn(3, 0, data_headers))
        .await
        .expect("writes");

    let mut error = session.streams.recv().await.expect("error stream");
    assert_eq!(header(&error.headers, "streamType"), Some("error"));
    assert_eq!(
        error.incoming.recv().await,
        None,
        "FIN at open: nothing comes"
    );
    let mut data = session.streams.recv().await.expect("data stream");
    assert_eq!(header(&data.headers, "port"), Some("80"));
    for id in [1, 3] {
        assert!(
            matches!(read_frame(&mut cr, &mut buf).await, Frame::SynReply { stream, .. } if stream == id)
        );
    }

    cw.write_all(&frame::encode(&Frame::Data {
        stream: 3,
        flags: 0,
        data: b"ping".to_vec(),
    }))
    .await
    .expect("writes");
    cw.write_all(&frame::encode(&Frame::Ping { id: 1 }))
        .await
        .expect("writes");
    assert_eq!(data.incoming.recv().await.as_deref(), Some(&b"ping"[..]));
    assert_eq!(read_frame(&mut cr, &mut buf).await, Frame::Ping { id: 1 });

    let big = vec![7u8; 100_000];
    assert!(data.writer.write(&big).await);
    data.writer.finish().await;
    let mut got = Vec::new();
    loop {
        match read_frame(&mut cr, &mut buf).await {
            Frame::Data {
                stream: 3,
                flags,
                data,
            } => {
                got.extend_from_slice(&data);
                if flags & FLAG_FIN != 0 {
                    break;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, big);

    cw.write_all(&frame::encode(&Frame::Data {
        stream: 3,
        flags: FLAG_FIN,
        data: vec![],
    }))
    .await
    .expect("writes");
    assert_eq!(data.incoming.recv().await, None);

    session.close();
    assert!(matches!(
        read_frame(&mut cr, &mut buf).await,
        Frame::GoAway { .. }
    ));
    drop(error.writer);
}

#[tokio::test]
async fn a_connection_that_breaks_the_protocol_ends() {
    let (client, server) = tokio::io::duplex(1 << 16);
    let mut session = Session::start(server);
    let (_cr, mut cw) = tokio::io::split(client);
    // A SYN_STREAM whose header block is not zlib.
    let bad = frame::encode(&Frame::SynStream {
        stream: 1,
        flags: 0,
        headers: b"junk".to_vec(),
    });
    cw.write_all(&bad).await.expect("writes");
    assert!(session.streams.recv().await.is_none());
}
