//! The protobuf wire format: varints, tags and length-delimited fields, read from a byte slice
//! and written to a buffer.

use super::ProtobufError;

/// The wire types Kubernetes' messages use (groups, 3 and 4, are refused).
pub const VARINT: u8 = 0;
pub const FIXED64: u8 = 1;
pub const LEN: u8 = 2;
pub const FIXED32: u8 = 5;

/// One field as read off the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'a [u8]),
}

/// Reads the fields of one message in order.
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for i in 0..10 {
            let (&byte, rest) = self.rest.split_first().ok_or(ProtobufError::Truncated)?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::Malformed(
            "varint longer than 10 bytes".into(),
        ))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        if self.rest.len() < n {
            return Err(ProtobufError::Truncated);
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    /// The next field's tag and value, or `None` at the end.
    pub fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|t| *t > 0)
            .ok_or_else(|| ProtobufError::Malformed(format!("invalid field tag {}", key >> 3)))?;
        let value = match (key & 7) as u8 {
            VARINT => Value::Varint(self.varint()?),
            FIXED64 => {
                let b = self.take(8)?;
                Value::Fixed64(u64::from_le_bytes(
                    b.try_into().map_err(|_| ProtobufError::Truncated)?,
                ))
            }
            LEN => {
                let n = usize::try_from(self.varint()?).map_err(|_| ProtobufError::Truncated)?;
                Value::Len(self.take(n)?)
            }
            FIXED32 => {
                let b = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes(
                    b.try_into().map_err(|_| ProtobufError::Truncated)?,
                ))
            }
            other => {
                return Err(ProtobufError::Malformed(format!(
                    "unsupported wire type {other} for field {tag}"
                )));
            }
        };
        Ok(Some((tag, value)))
    }
}

/// Builds one message.
#[derive(Debug, Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.bytes.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.bytes.push(v as u8);
    }

    fn key(&mut self, tag: u32, wire_type: u8) {
        self.varint((u64::from(tag) << 3) | u64::from(wire_type));
    }

    pub fn varint_field(&mut self, tag: u32, v: u64) {
        self.key(tag, VARINT);
        self.varint(v);
    }

    pub fn fixed64_field(&mut self, tag: u32, v: u64) {
        self.key(tag, FIXED64);
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn len_field(&mut self, tag: u32, bytes: &[u8]) {
        self.key(tag, LEN);
        self.varint(bytes.len() as u64);
        self.bytes.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_written_are_read_back_in_order() {
        let mut w = Writer::default();
        w.varint_field(1, 300);
        w.len_field(2, b"abc");
        w.fixed64_field(16, 1.5f64.to_bits());
        w.varint_field(3, u64::MAX);
        let mut r = Reader::new(&w.bytes);
        assert_eq!(r.next_field(), Ok(Some((1, Value::Varint(300)))));
        assert_eq!(r.next_field(), Ok(Some((2, Value::Len(b"abc")))));
        assert_eq!(
            r.next_field(),
            Ok(Some((16, Value::Fixed64(1.5f64.to_bits()))))
        );
        assert_eq!(r.next_field(), Ok(Some((3, Value::Varint(u64::MAX)))));
        assert_eq!(r.next_field(), Ok(None));
    }

    #[test]
    fn cut_off_and_malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &[0x08][..],
            &[0x12, 0x05, b'a'],
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            &[0x0b],
            &[0x00, 0x01],
            &[0x09, 1, 2],
        ] {
            let mut r = Reader::new(bad);
            assert!(r.next_field().is_err(), "{bad:?}");
        }
    }
}
