//! A queued outgoing frame.

use sperli_wire::header::FrameHeader;
use sperli_wire::limits::HEADER_LEN;

/// One queued outgoing frame: the header (plus up to 8 inline payload
/// bytes, so a HEARTBEAT needs no allocation) and the payload.
#[derive(Debug)]
pub struct Outgoing {
    pub(super) head: [u8; HEADER_LEN + 8],
    pub(super) head_len: usize,
    pub(super) payload: Vec<u8>,
    /// A send sequence number to report when written (0: none).
    pub seq: u64,
}

impl Outgoing {
    /// A frame with `header` (its length set here) and `payload`.
    pub fn new(mut header: FrameHeader, payload: Vec<u8>, seq: u64) -> Self {
        header.length = payload.len() as u32;
        let mut head = [0u8; HEADER_LEN + 8];
        head[..HEADER_LEN].copy_from_slice(&header.to_bytes());
        Self {
            head,
            head_len: HEADER_LEN,
            payload,
            seq,
        }
    }

    /// Raw bytes, sent as they are (tests of hostile peers use this).
    pub fn raw(bytes: Vec<u8>) -> Self {
        Self {
            head: [0; HEADER_LEN + 8],
            head_len: 0,
            payload: bytes,
            seq: 0,
        }
    }

    pub(super) fn heartbeat(header: FrameHeader, counter: u64) -> Self {
        let mut h = header;
        h.length = 8;
        let mut head = [0u8; HEADER_LEN + 8];
        head[..HEADER_LEN].copy_from_slice(&h.to_bytes());
        head[HEADER_LEN..].copy_from_slice(&counter.to_le_bytes());
        Self {
            head,
            head_len: HEADER_LEN + 8,
            payload: Vec::new(),
            seq: 0,
        }
    }

    /// The header's `membership_epoch` (none for raw bytes).
    pub(super) fn membership_epoch(&self) -> Option<u32> {
        if self.head_len < HEADER_LEN {
            return None;
        }
        let b = &self.head[8..12];
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn len(&self) -> usize {
        self.head_len + self.payload.len()
    }
}
