//! Whole frames: header plus payload (protocol §6).

use crate::error::FrameError;
use crate::header::{check, FrameHeader, Receiver, Verdict};
use crate::limits::{HEADER_LEN, MAX_PAYLOAD};
use crate::payload::Payload;

/// Encodes a frame: the header (its `length` set from the payload, its type
/// from the payload's) then the payload.
///
/// ```
/// use sperli_wire::frame::encode_frame;
/// use sperli_wire::header::FrameHeader;
/// use sperli_wire::payload::Payload;
/// use sperli_wire::{bye::Bye, FrameType, JobId};
/// let h = FrameHeader::new(FrameType::Bye, JobId([1; 16]), 0, 1, 1);
/// assert_eq!(encode_frame(h, &Payload::Bye(Bye)).len(), 52);
/// ```
pub fn encode_frame(header: FrameHeader, payload: &Payload<'_>) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    payload.encode(&mut out);
    finish(header, payload.frame_type(), out)
}

/// Encodes a frame from payload bytes that are already encoded.
pub fn encode_frame_bytes(header: FrameHeader, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    out.extend_from_slice(payload);
    finish(header, header.frame_type, out)
}

fn finish(mut header: FrameHeader, t: crate::FrameType, mut out: Vec<u8>) -> Vec<u8> {
    debug_assert!(out.len() - HEADER_LEN <= MAX_PAYLOAD as usize);
    header.frame_type = t;
    header.length = (out.len() - HEADER_LEN) as u32;
    out[..HEADER_LEN].copy_from_slice(&header.to_bytes());
    out
}

/// A whole frame as a receiver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received<'a> {
    /// Accepted: the header and the decoded payload.
    Accept(FrameHeader, Payload<'a>),
    /// Older incarnation: dropped.
    Discard,
}

/// Judges a whole frame held in memory: the header check, then (only if
/// accepted) the payload, both with the job's features in `rx` (protocol
/// §6.2 checks 12 and 13). `bytes` must be exactly one frame.
pub fn decode_frame<'a>(bytes: &'a [u8], rx: &Receiver) -> Result<Received<'a>, FrameError> {
    let Some((head, payload)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(FrameError::CutShort {
            read: bytes.len(),
            total: HEADER_LEN,
        });
    };
    let expect = |length: u32| {
        let total = HEADER_LEN + length as usize;
        if payload.len() == length as usize {
            Ok(())
        } else {
            Err(FrameError::CutShort {
                read: bytes.len(),
                total,
            })
        }
    };
    match check(head, rx) {
        Verdict::Reject(e) => Err(e),
        Verdict::Discard { length } => expect(length).map(|()| Received::Discard),
        Verdict::Accept(h) => {
            expect(h.length)?;
            let p = Payload::decode_with(h.frame_type, payload, rx.features)?;
            Ok(Received::Accept(h, p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Data;
    use crate::{FrameType, JobId};

    #[test]
    fn round_trip_and_cut_short() {
        let job = JobId([3; 16]);
        let rx = Receiver {
            job_id: job,
            own_rank: 1,
            peer_rank: 0,
            incarnation: 1,
            size: 2,
            features: crate::limits::FEATURE_V1_CORE,
            membership_epoch: 0,
        };
        let h = FrameHeader::new(FrameType::Data, job, 0, 1, 1).with_tag(4);
        let f = encode_frame(h, &Payload::Data(Data(b"hi")));
        match decode_frame(&f, &rx).unwrap() {
            Received::Accept(h, Payload::Data(Data(m))) => {
                assert_eq!((h.tag, h.length, m), (4, 2, &b"hi"[..]))
            }
            other => panic!("{other:?}"),
        }
        for n in 0..f.len() {
            assert!(decode_frame(&f[..n], &rx).is_err());
        }
    }
}
