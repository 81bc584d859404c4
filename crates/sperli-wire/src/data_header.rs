//! The DATA payload of a job with HELLO feature bit 3 (protocol §16.2):
//! the 24-byte DATA header (communicator, kind, message number, total),
//! then the data the frame carries. [`DataFrame::decode`] applies the
//! decode rules of §16.2 in their order; the rules that need the frames
//! before it are in [`message_stream`](crate::message_stream).

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;
use crate::limits::{DATA_HEADER_LEN, MAX_COMMUNICATOR_ID, MAX_MESSAGE_FRAME_DATA};

/// The `kind` byte of a DATA header (protocol §16.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DataKind {
    /// 0: a frame of a standard message.
    Standard = 0,
    /// 1: a frame of a synchronous message (its receiver sends a match
    /// notice when a receive matches it, protocol §16.5).
    Synchronous = 1,
    /// 2: a match notice (no data, total 0).
    Notice = 2,
}

impl DataKind {
    /// The kind for a code 0..=2.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(DataKind::Standard),
            1 => Some(DataKind::Synchronous),
            2 => Some(DataKind::Notice),
            _ => None,
        }
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Whether frames of this kind carry a message (kinds 0 and 1).
    pub fn is_message(self) -> bool {
        self != DataKind::Notice
    }
}

/// The 24-byte DATA header (protocol §16.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// The communicator id, 0..=2147483647 (0: the job's).
    pub communicator: u32,
    /// Message frame (standard or synchronous) or match notice.
    pub kind: DataKind,
    /// The message number (a notice: the number of the message it answers).
    pub message: u64,
    /// The message's length in bytes; 0 in a notice.
    pub total: u64,
}

impl DataHeader {
    /// The header of message number `message` of `len` bytes on
    /// `communicator`: synchronous (kind 1) or standard (kind 0).
    pub fn message(communicator: u32, message: u64, len: usize, sync: bool) -> Self {
        Self {
            communicator,
            kind: if sync {
                DataKind::Synchronous
            } else {
                DataKind::Standard
            },
            message,
            total: len as u64,
        }
    }

    /// The 24 bytes.
    pub fn to_bytes(&self) -> [u8; DATA_HEADER_LEN] {
        let mut v = Vec::with_capacity(DATA_HEADER_LEN);
        v.put_u32(self.communicator);
        v.push(self.kind.code());
        v.extend_from_slice(&[0; 3]);
        v.put_u64(self.message);
        v.put_u64(self.total);
        let mut out = [0; DATA_HEADER_LEN];
        out.copy_from_slice(&v);
        out
    }

    /// The number of frames of a message of `total` bytes: max(1,
    /// ⌈total / 16777192⌉) (protocol §16.2).
    ///
    /// ```
    /// use sperli_wire::data_header::DataHeader;
    /// assert_eq!(DataHeader::frames_of(0), 1);
    /// assert_eq!(DataHeader::frames_of(16_777_192), 1);
    /// assert_eq!(DataHeader::frames_of(16_777_193), 2);
    /// ```
    pub fn frames_of(total: u64) -> u64 {
        Self::frames_of_with(total, MAX_MESSAGE_FRAME_DATA as u64)
    }

    /// [`frames_of`](Self::frames_of) for frames of `max_data` data bytes
    /// (tests and vectors use small ones).
    pub fn frames_of_with(total: u64, max_data: u64) -> u64 {
        total.div_ceil(max_data.max(1)).max(1)
    }
}

/// A whole DATA payload of a job with feature bit 3: the DATA header and
/// the data bytes of this frame.
///
/// The data is the rest of the payload, so a proper prefix shorter than
/// the header does not decode, and one that keeps the header decodes as a
/// frame with fewer data bytes, which check 3 (`length`) of protocol
/// §16.4 rejects ([`MessageStream`](crate::message_stream::MessageStream)).
/// A match notice is exactly 24 bytes: every proper prefix fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFrame<'a> {
    /// The DATA header.
    pub header: DataHeader,
    /// The data this frame carries (empty in a notice).
    pub data: &'a [u8],
}

impl<'a> Codec<'a> for DataFrame<'a> {
    const NAME: &'static str = "DATA payload";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.header.to_bytes());
        out.extend_from_slice(self.data);
    }

    /// The decode rules of protocol §16.2, in order: `data_header`,
    /// `communicator_id`, `kind`, `reserved`, `message_zero`,
    /// `data_length`, `notice_body` (every failure H1610).
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        if r.left() < DATA_HEADER_LEN {
            return Err(DecodeError::Truncated {
                field: "DATA header",
                needed: DATA_HEADER_LEN,
                left: r.left(),
            });
        }
        let communicator = r.u32("communicator")?;
        if communicator > MAX_COMMUNICATOR_ID {
            return Err(DecodeError::OutOfRange {
                field: "communicator",
                min: 0,
                max: u64::from(MAX_COMMUNICATOR_ID),
                got: u64::from(communicator),
            });
        }
        let k = r.u8("kind")?;
        let kind = DataKind::from_code(k).ok_or(DecodeError::OutOfRange {
            field: "kind",
            min: 0,
            max: 2,
            got: u64::from(k),
        })?;
        r.zeros(3, "DATA header reserved")?;
        let message = r.u64("message")?;
        if message == 0 {
            return Err(DecodeError::OutOfRange {
                field: "message",
                min: 1,
                max: u64::MAX,
                got: 0,
            });
        }
        let total = r.u64("total")?;
        let data = r.rest();
        if kind.is_message() && data.len() as u64 > total {
            return Err(DecodeError::OutOfRange {
                field: "data length",
                min: 0,
                max: total,
                got: data.len() as u64,
            });
        }
        if kind == DataKind::Notice && (total != 0 || !data.is_empty()) {
            return Err(DecodeError::NotZero {
                field: if total != 0 {
                    "notice total"
                } else {
                    "notice data length"
                },
                got: if total != 0 { total } else { data.len() as u64 },
            });
        }
        Ok(Self {
            header: DataHeader {
                communicator,
                kind,
                message,
                total,
            },
            data,
        })
    }
}

/// The decode rule a failure of [`DataFrame::decode`] breaks: its word in
/// protocol §16.2 (`data_header`, `communicator_id`, `kind`, `reserved`,
/// `message_zero`, `data_length`, `notice_body`).
pub fn rule_name(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Truncated { .. } => "data_header",
        DecodeError::OutOfRange { field, .. } | DecodeError::Mismatch { field, .. } => match *field
        {
            "communicator" => "communicator_id",
            "kind" => "kind",
            "message" => "message_zero",
            _ => "data_length",
        },
        DecodeError::NotZero { field, .. } if field.starts_with("notice") => "notice_body",
        DecodeError::NotZero { .. } => "reserved",
        _ => "payload",
    }
}

/// Appends the frames' payloads of one message (protocol §16.2): every
/// frame carries `header` (its `total` must be `data.len()`), every frame
/// but the last exactly `max_data` bytes (16777192 on the wire; smaller in
/// tests), the last the rest. Calls `emit` once per payload, in order.
pub fn split_message(
    header: DataHeader,
    data: &[u8],
    max_data: usize,
    mut emit: impl FnMut(Vec<u8>),
) {
    debug_assert_eq!(header.total, data.len() as u64);
    debug_assert!(header.kind.is_message() && max_data > 0);
    let mut chunks = data.chunks(max_data).peekable();
    if chunks.peek().is_none() {
        emit(header.to_bytes().to_vec());
        return;
    }
    for c in chunks {
        emit(DataFrame { header, data: c }.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(b: &[u8]) -> Result<DataFrame<'_>, &'static str> {
        DataFrame::decode(b).map_err(|e| rule_name(&e))
    }

    fn sample() -> Vec<u8> {
        DataFrame {
            header: DataHeader {
                communicator: 3,
                kind: DataKind::Synchronous,
                message: 2,
                total: 5,
            },
            data: b"hello",
        }
        .to_vec()
    }

    #[test]
    fn every_rule_in_its_order() {
        let ok = sample();
        assert_eq!(decode(&ok).unwrap().data, b"hello");
        for n in 0..DATA_HEADER_LEN {
            assert_eq!(decode(&ok[..n]), Err("data_header"), "prefix {n}");
        }
        let mut b = ok.clone();
        b[3] = 0x80;
        b[4] = 9; // the communicator is judged before the kind
        assert_eq!(decode(&b), Err("communicator_id"));
        let mut b = ok.clone();
        b[4] = 3;
        b[5] = 1;
        assert_eq!(decode(&b), Err("kind"));
        let mut b = ok.clone();
        b[7] = 1;
        assert_eq!(decode(&b), Err("reserved"));
        let mut b = ok.clone();
        b[8] = 0;
        assert_eq!(decode(&b), Err("message_zero"));
        let mut b = ok.clone();
        b[16] = 4; // total 4, five data bytes
        assert_eq!(decode(&b), Err("data_length"));
        let notice = |total: u64, data: &[u8]| {
            let mut v = DataHeader {
                communicator: 3,
                kind: DataKind::Notice,
                message: 2,
                total,
            }
            .to_bytes()
            .to_vec();
            v.extend_from_slice(data);
            v
        };
        assert!(decode(&notice(0, b"")).is_ok());
        assert_eq!(decode(&notice(1, b"")), Err("notice_body"));
        assert_eq!(decode(&notice(0, b"x")), Err("notice_body"));
    }

    #[test]
    fn a_message_splits_into_full_frames_and_a_rest() {
        let h = |total| DataHeader {
            communicator: 0,
            kind: DataKind::Standard,
            message: 1,
            total,
        };
        let mut out = Vec::new();
        split_message(h(7), b"abcdefg", 3, |p| out.push(p));
        let lens: Vec<usize> = out.iter().map(|p| p.len() - DATA_HEADER_LEN).collect();
        assert_eq!(lens, [3, 3, 1]);
        out.clear();
        split_message(h(0), b"", 3, |p| out.push(p));
        assert_eq!(out, [h(0).to_bytes().to_vec()]);
    }

    proptest! {
        #[test]
        fn round_trip(communicator in 0..=MAX_COMMUNICATOR_ID, kind in 0u8..2, message in 1u64.., data in proptest::collection::vec(any::<u8>(), 0..64), extra in 0u64..1000) {
            let f = DataFrame {
                header: DataHeader {
                    communicator,
                    kind: DataKind::from_code(kind).unwrap(),
                    message,
                    total: data.len() as u64 + extra,
                },
                data: &data,
            };
            let bytes = f.to_vec();
            prop_assert_eq!(DataFrame::decode(&bytes).unwrap(), f);
            for n in 0..DATA_HEADER_LEN {
                prop_assert!(DataFrame::decode(&bytes[..n]).is_err());
            }
        }

        #[test]
        fn any_bytes_get_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = DataFrame::decode(&bytes);
        }
    }
}
