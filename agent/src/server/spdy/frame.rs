//! SPDY/3.1 frames as kubectl's streaming connections use them: SYN_STREAM, SYN_REPLY,
//! RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE and data frames, parsed from
//! and written to bytes. Header blocks stay compressed here (`headers.rs` owns the zlib
//! context). Pure: no I/O.

use super::SpdyError;

/// The protocol version in every control frame.
pub const VERSION: u16 = 3;
/// The flag that ends a stream's half (data frames and SYN_STREAM/SYN_REPLY/HEADERS).
pub const FLAG_FIN: u8 = 0x01;
/// The longest frame body the 24-bit length can carry.
pub const MAX_LENGTH: usize = 0x00ff_ffff;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// One frame. Header blocks are the compressed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream: u32,
        flags: u8,
        headers: Vec<u8>,
    },
    SynReply {
        stream: u32,
        flags: u8,
        headers: Vec<u8>,
    },
    RstStream {
        stream: u32,
        status: u32,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_stream: u32,
        status: u32,
    },
    Headers {
        stream: u32,
        flags: u8,
        headers: Vec<u8>,
    },
    Data {
        stream: u32,
        flags: u8,
        data: Vec<u8>,
    },
    /// SETTINGS, WINDOW_UPDATE and unknown control frames: read and ignored (kubectl's SPDY
    /// library does no flow control).
    Ignored,
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses one frame from the front of `buf`: the frame and the bytes it took, or `None` when
/// more bytes are needed.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, SpdyError> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let flags = buf[4];
    let length = (word(buf, 4) & 0x00ff_ffff) as usize;
    let total = 8 + length;
    if buf.len() < total {
        return Ok(None);
    }
    let body = &buf[8..total];
    let control = buf[0] & 0x80 != 0;
    if !control {
        let stream = word(buf, 0) & 0x7fff_ffff;
        return Ok(Some((
            Frame::Data {
                stream,
                flags,
                data: body.to_vec(),
            },
            total,
        )));
    }
    let version = u16::from_be_bytes([buf[0], buf[1]]) & 0x7fff;
    if version != VERSION {
        return Err(SpdyError::Protocol(format!("SPDY version {version}")));
    }
    let kind = u16::from_be_bytes([buf[2], buf[3]]);
    let need = |n: usize| {
        if body.len() < n {
            Err(SpdyError::Protocol(format!(
                "control frame {kind} of {} bytes",
                body.len()
            )))
        } else {
            Ok(())
        }
    };
    let stream = || word(body, 0) & 0x7fff_ffff;
    let frame = match kind {
        SYN_STREAM => {
            need(10)?;
            Frame::SynStream {
                stream: stream(),
                flags,
                headers: body[10..].to_vec(),
            }
        }
        SYN_REPLY => {
            need(4)?;
            Frame::SynReply {
                stream: stream(),
                flags,
                headers: body[4..].to_vec(),
            }
        }
        RST_STREAM => {
            need(8)?;
            Frame::RstStream {
                stream: stream(),
                status: word(body, 4),
            }
        }
        PING => {
            need(4)?;
            Frame::Ping { id: word(body, 0) }
        }
        GOAWAY => {
            need(8)?;
            Frame::GoAway {
                last_stream: stream(),
                status: word(body, 4),
            }
        }
        HEADERS => {
            need(4)?;
            Frame::Headers {
                stream: stream(),
                flags,
                headers: body[4..].to_vec(),
            }
        }
        SETTINGS | WINDOW_UPDATE => Frame::Ignored,
        _ => Frame::Ignored,
    };
    Ok(Some((frame, total)))
}

fn control(kind: u16, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&((u32::from(flags) << 24) | body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The bytes of `frame` (whose bodies fit in [`MAX_LENGTH`]; data is split by the caller).
pub fn encode(frame: &Frame) -> Vec<u8> {
    match frame {
        Frame::SynStream {
            stream,
            flags,
            headers,
        } => {
            let mut body = stream.to_be_bytes().to_vec();
            body.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
            body.extend_from_slice(headers);
            control(SYN_STREAM, *flags, &body)
        }
        // SYN_REPLY and HEADERS have the same body: the stream, then the header block.
        Frame::SynReply {
            stream,
            flags,
            headers,
        }
        | Frame::Headers {
            stream,
            flags,
            headers,
        } => {
            let kind = match frame {
                Frame::SynReply { .. } => SYN_REPLY,
                _ => HEADERS,
            };
            let mut body = stream.to_be_bytes().to_vec();
            body.extend_from_slice(headers);
            control(kind, *flags, &body)
        }
        Frame::RstStream { stream, status } => {
            let mut body = stream.to_be_bytes().to_vec();
            body.extend_from_slice(&status.to_be_bytes());
            control(RST_STREAM, 0, &body)
        }
        Frame::Ping { id } => control(PING, 0, &id.to_be_bytes()),
        Frame::GoAway {
            last_stream,
            status,
        } => {
            let mut body = last_stream.to_be_bytes().to_vec();
            body.extend_from_slice(&status.to_be_bytes());
            control(GOAWAY, 0, &body)
        }
        Frame::Data {
            stream,
            flags,
            data,
        } => {
            let mut out = Vec::with_capacity(8 + data.len());
            out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
            out.extend_from_slice(&((u32::from(*flags) << 24) | data.len() as u32).to_be_bytes());
            out.extend_from_slice(data);
            out
        }
        Frame::Ignored => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_written_are_parsed_back() {
        let frames = [
            Frame::SynStream {
                stream: 1,
                flags: FLAG_FIN,
                headers: vec![1, 2, 3],
            },
            Frame::SynReply {
                stream: 3,
                flags: 0,
                headers: vec![9],
            },
            Frame::RstStream {
                stream: 5,
                status: 5,
            },
            Frame::Ping { id: 7 },
            Frame::GoAway {
                last_stream: 9,
                status: 0,
            },
            Frame::Headers {
                stream: 1,
                flags: 0,
                headers: vec![],
            },
            Frame::Data {
                stream: 11,
                flags: FLAG_FIN,
                data: b"hello".to_vec(),
            },
        ];
        let mut wire: Vec<u8> = frames.iter().flat_map(encode).collect();
        let mut parsed = Vec::new();
        while let Some((frame, n)) = parse(&wire).expect("parses") {
            parsed.push(frame);
            wire.drain(..n);
        }
        assert_eq!(parsed, frames);
        assert!(wire.is_empty());
    }

    #[test]
    fn partial_frames_wait_for_more_and_bad_ones_are_errors() {
        let whole = encode(&Frame::Ping { id: 1 });
        assert_eq!(parse(&whole[..5]).expect("partial"), None);
        assert_eq!(parse(&whole[..11]).expect("partial"), None);
        // Version 2.
        let mut v2 = whole.clone();
        v2[1] = 2;
        assert!(parse(&v2).is_err());
        // A RST_STREAM too short for its fields.
        let short = control(RST_STREAM, 0, &[0, 0, 0, 1]);
        assert!(parse(&short).is_err());
        // SETTINGS and WINDOW_UPDATE are read past.
        let settings = control(SETTINGS, 0, &[0, 0, 0, 0]);
        assert_eq!(
            parse(&settings).expect("parses"),
            Some((Frame::Ignored, settings.len()))
        );
    }
}
