//! SPDY/3 header blocks: name/value pairs (`u32` count, then `u32`-length-prefixed names and
//! values), zlib-compressed as one stream per direction for the whole connection, the
//! client's seeded with the protocol's preset dictionary.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::SpdyError;

/// The words the SPDY/3 dictionary lists with a length prefix, in its order.
const DICTIONARY_WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The text the SPDY/3 dictionary ends with, after the words.
const DICTIONARY_TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, ",
    "Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

/// The SPDY/3 zlib dictionary (1423 bytes).
fn dictionary() -> Vec<u8> {
    let mut out = Vec::with_capacity(1423);
    for w in DICTIONARY_WORDS {
        out.extend_from_slice(&(w.len() as u32).to_be_bytes());
        out.extend_from_slice(w.as_bytes());
    }
    out.extend_from_slice(DICTIONARY_TAIL.as_bytes());
    out
}

/// The dictionary, for the session tests' client.
#[cfg(test)]
pub fn tests_dictionary() -> Vec<u8> {
    dictionary()
}

/// Header name/value pairs (names lower-case; several values of one name NUL-separated).
pub type Headers = Vec<(String, String)>;

/// The first value of header `name`.
pub fn get<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.split('\0').next().unwrap_or_default())
}

/// A decoded header block may not grow past this (a zlib bomb in a SYN_STREAM).
const MAX_BLOCK: usize = 1 << 20;

/// One connection's two compression contexts.
pub struct Codec {
    inflate: Decompress,
    deflate: Compress,
}

impl Default for Codec {
    fn default() -> Self {
        Codec {
            inflate: Decompress::new(true),
            deflate: Compress::new(Compression::default(), true),
        }
    }
}

impl Codec {
    /// Decompresses and parses one received header block.
    pub fn decode(&mut self, block: &[u8]) -> Result<Headers, SpdyError> {
        let mut out = Vec::new();
        let mut input = block;
        loop {
            out.reserve(4096.max(block.len() * 4));
            let (in_before, out_before) = (self.inflate.total_in(), out.len());
            let result = self
                .inflate
                .decompress_vec(input, &mut out, FlushDecompress::Sync);
            input = &input[(self.inflate.total_in() - in_before) as usize..];
            match result {
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(&dictionary())
                        .map_err(|e| SpdyError::Protocol(format!("header dictionary: {e}")))?;
                }
                Err(e) => return Err(SpdyError::Protocol(format!("header block: {e}"))),
                Ok(Status::StreamEnd) => break,
                // Everything taken and the output not cut short: the block is whole.
                Ok(_) if input.is_empty() && out.len() < out.capacity() => break,
                Ok(_) if input.len() == block.len() && out.len() == out_before => {
                    return Err(SpdyError::Protocol("header block does not inflate".into()));
                }
                Ok(_) => {}
            }
            if out.len() > MAX_BLOCK {
                return Err(SpdyError::Protocol("header block too large".into()));
            }
        }
        parse_block(&out)
    }

    /// Serializes and compresses one header block to send.
    pub fn encode(&mut self, headers: &[(&str, &str)]) -> Result<Vec<u8>, SpdyError> {
        let mut plain = (headers.len() as u32).to_be_bytes().to_vec();
        for (name, value) in headers {
            for part in [name.to_ascii_lowercase().as_str(), value] {
                plain.extend_from_slice(&(part.len() as u32).to_be_bytes());
                plain.extend_from_slice(part.as_bytes());
            }
        }
        let mut out = Vec::new();
        let mut input = plain.as_slice();
        loop {
            out.reserve(plain.len() + 256);
            let in_before = self.deflate.total_in();
            self.deflate
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| SpdyError::Protocol(format!("compressing headers: {e}")))?;
            input = &input[(self.deflate.total_in() - in_before) as usize..];
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

fn parse_block(b: &[u8]) -> Result<Headers, SpdyError> {
    let bad = || SpdyError::Protocol("truncated header block".into());
    let mut at = 0usize;
    let word = |at: &mut usize| -> Result<u32, SpdyError> {
        let w = b.get(*at..*at + 4).ok_or_else(bad)?;
        *at += 4;
        Ok(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    let count = word(&mut at)?;
    let mut out = Vec::new();
    for _ in 0..count {
        let mut pair = [String::new(), String::new()];
        for part in &mut pair {
            let len = word(&mut at)? as usize;
            let bytes = b
                .get(at..at.checked_add(len).ok_or_else(bad)?)
                .ok_or_else(bad)?;
            at += len;
            *part = String::from_utf8_lossy(bytes).into_owned();
        }
        let [name, value] = pair;
        out.push((name.to_ascii_lowercase(), value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_the_protocols() {
        let d = dictionary();
        assert_eq!(d.len(), 1423);
        // The Adler-32 a zlib stream names its dictionary by.
        let (mut a, mut b) = (1u32, 0u32);
        for byte in &d {
            a = (a + u32::from(*byte)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!((b << 16) | a, 0xe3c6_a7c2);
    }

    #[test]
    fn blocks_round_trip_across_one_connections_contexts() {
        let mut sender = Codec::default();
        let mut receiver = Codec::default();
        for i in 0..3 {
            let port = format!("80{i}");
            let block = sender
                .encode(&[("streamType", "data"), ("port", &port), ("requestID", "0")])
                .expect("encodes");
            let headers = receiver.decode(&block).expect("decodes");
            assert_eq!(get(&headers, "streamtype"), Some("data"));
            assert_eq!(get(&headers, "port"), Some(port.as_str()));
        }
    }

    #[test]
    fn a_block_compressed_with_the_dictionary_decodes() {
        // As Go's framer writes them: a zlib stream whose header names the dictionary.
        let mut deflate = Compress::new(Compression::default(), true);
        deflate.set_dictionary(&dictionary()).expect("dictionary");
        let mut plain = 1u32.to_be_bytes().to_vec();
        for part in ["streamtype", "error"] {
            plain.extend_from_slice(&(part.len() as u32).to_be_bytes());
            plain.extend_from_slice(part.as_bytes());
        }
        let mut block = Vec::with_capacity(1024);
        deflate
            .compress_vec(&plain, &mut block, FlushCompress::Sync)
            .expect("compresses");
        let headers = Codec::default().decode(&block).expect("decodes");
        assert_eq!(
            headers,
            vec![("streamtype".to_string(), "error".to_string())]
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Codec::default().decode(b"not zlib at all").is_err());
        assert!(parse_block(&[0, 0, 0, 2, 0, 0, 0, 9, b'a']).is_err());
    }
}
