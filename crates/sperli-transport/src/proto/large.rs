//! The convention of `send_large`/`recv_large` for messages longer than
//! one DATA frame (crate docs; nothing on the wire changes): the first DATA
//! frame starts with the total length as a little-endian `u64`, followed
//! by as many message bytes as fit; further DATA frames with the same tag
//! carry the rest in order, each as full as possible.
//!
//! [`split`] says which bytes go in which frame; [`LargeAssembly`] puts
//! them together again, fed whole frames or the pieces of a frame as they
//! arrive (so a streamed frame lands in the message without a copy of its
//! own).

use std::ops::Range;

use sperli_wire::error::{DecodeError, FrameError, LocalError};
use sperli_wire::limits::MAX_PAYLOAD;
use sperli_wire::{Error, FrameType};

/// Bytes of the length prefix.
pub const PREFIX: usize = 8;

/// At most this much is reserved for a message before its bytes come: the
/// total is the peer's word, and a larger message grows as it arrives.
pub const RESERVE_CAP: usize = 1 << 30;

/// One frame of a large message: the prefix (first frame only) and the
/// range of the message's bytes it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The little-endian total length, in the first frame.
    pub prefix: Option<[u8; PREFIX]>,
    /// The message bytes of this frame.
    pub range: Range<usize>,
}

impl Piece {
    /// The frame's payload length.
    pub fn len(&self) -> usize {
        self.prefix.map_or(0, |p| p.len()) + self.range.len()
    }

    /// True for a frame without bytes (never: the first frame has its
    /// prefix).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The frames of a message of `total` bytes, in order.
pub fn split(total: usize) -> Vec<Piece> {
    let max = MAX_PAYLOAD as usize;
    let first = total.min(max - PREFIX);
    let mut out = vec![Piece {
        prefix: Some((total as u64).to_le_bytes()),
        range: 0..first,
    }];
    let mut at = first;
    while at < total {
        let end = (at + max).min(total);
        out.push(Piece {
            prefix: None,
            range: at..end,
        });
        at = end;
    }
    out
}

fn bad(error: DecodeError) -> Error {
    FrameError::Payload {
        frame_type: FrameType::Data,
        error,
    }
    .into()
}

/// A message of the convention being put together.
#[derive(Debug, Default)]
pub struct LargeAssembly {
    prefix: [u8; PREFIX],
    prefix_len: usize,
    total: Option<usize>,
    buf: Vec<u8>,
    frames: u64,
    frame_bytes: usize,
}

impl LargeAssembly {
    /// An empty assembly, waiting for the first frame.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty assembly that puts the message into `buf` (cleared; its
    /// capacity is reused, so a receiver that passes the same buffer again
    /// allocates, and faults in, nothing).
    pub fn with_buffer(mut buf: Vec<u8>) -> Self {
        buf.clear();
        Self {
            buf,
            ..Self::default()
        }
    }

    /// The total length, once the first frame's prefix came.
    pub fn total(&self) -> Option<usize> {
        self.total
    }

    /// Message bytes received so far.
    pub fn received(&self) -> usize {
        self.buf.len()
    }

    /// The next bytes of the current frame.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<(), Error> {
        self.frame_bytes += bytes.len();
        if self.frames == 0 && self.prefix_len < PREFIX {
            let n = (PREFIX - self.prefix_len).min(bytes.len());
            self.prefix[self.prefix_len..self.prefix_len + n].copy_from_slice(&bytes[..n]);
            self.prefix_len += n;
            bytes = &bytes[n..];
            if self.prefix_len == PREFIX {
                let total = u64::from_le_bytes(self.prefix);
                let total = usize::try_from(total).map_err(|_| {
                    bad(DecodeError::OutOfRange {
                        field: "send_large total length",
                        min: 0,
                        max: usize::MAX as u64,
                        got: total,
                    })
                })?;
                let reserve = total.min(RESERVE_CAP);
                self.buf.try_reserve_exact(reserve).map_err(|_| {
                    Error::Local(LocalError::OutOfMemory {
                        op: "reserving memory for a recv_large message",
                        bytes: reserve,
                    })
                })?;
                self.total = Some(total);
            }
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let Some(total) = self.total else {
            return Ok(());
        };
        if self.buf.len() + bytes.len() > total {
            return Err(bad(DecodeError::TrailingBytes {
                item: "send_large message",
                extra: self.buf.len() + bytes.len() - total,
            }));
        }
        self.buf.try_reserve(bytes.len()).map_err(|_| {
            Error::Local(LocalError::OutOfMemory {
                op: "growing a recv_large message",
                bytes: bytes.len(),
            })
        })?;
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The current frame is complete; true when the message is.
    pub fn end_frame(&mut self) -> Result<bool, Error> {
        let bytes = std::mem::take(&mut self.frame_bytes);
        if self.frames == 0 && self.prefix_len < PREFIX {
            return Err(bad(DecodeError::Truncated {
                field: "send_large length prefix",
                needed: PREFIX,
                left: self.prefix_len,
            }));
        }
        if self.frames > 0 && bytes == 0 && !self.is_complete() {
            // An empty continuation frame carries nothing: the convention
            // fills every frame.
            return Err(bad(DecodeError::OutOfRange {
                field: "send_large continuation frame length",
                min: 1,
                max: u64::from(MAX_PAYLOAD),
                got: 0,
            }));
        }
        self.frames += 1;
        Ok(self.is_complete())
    }

    /// A whole frame: [`LargeAssembly::push`] then
    /// [`LargeAssembly::end_frame`].
    pub fn push_frame(&mut self, payload: &[u8]) -> Result<bool, Error> {
        self.push(payload)?;
        self.end_frame()
    }

    /// True once every byte of the message came.
    pub fn is_complete(&self) -> bool {
        self.total.is_some_and(|t| self.buf.len() == t)
    }

    /// The message.
    pub fn into_message(self) -> Vec<u8> {
        self.buf
    }
}

/// The frame payloads of `data` under the convention (tests).
#[cfg(test)]
pub(crate) fn frames_of(data: &[u8]) -> Vec<Vec<u8>> {
    split(data.len())
        .into_iter()
        .map(|p| {
            let mut f = p.prefix.map_or(Vec::new(), |x| x.to_vec());
            f.extend_from_slice(&data[p.range]);
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = MAX_PAYLOAD as usize;

    #[test]
    fn split_fills_every_frame() {
        let s = split(3 * MAX);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].len(), MAX);
        assert_eq!(s[0].range, 0..MAX - 8);
        assert_eq!(s[1].len(), MAX);
        assert_eq!(s[3].range, 3 * MAX - 8..3 * MAX);
        assert_eq!(
            split(0),
            vec![Piece {
                prefix: Some([0; 8]),
                range: 0..0
            }]
        );
        assert_eq!(split(MAX - 8).len(), 1);
        assert_eq!(split(MAX - 7).len(), 2);
    }

    #[test]
    fn assembles_whole_frames_and_pieces_alike() {
        let data: Vec<u8> = (0..2 * MAX + 5).map(|i| (i % 251) as u8).collect();
        let frames = frames_of(&data);
        let mut whole = LargeAssembly::new();
        let mut done = false;
        for f in &frames {
            assert!(!done);
            done = whole.push_frame(f).unwrap();
        }
        assert!(done);
        assert_eq!(whole.into_message(), data);
        // Pieces of 3, 5 and 7 bytes, cut anywhere (the prefix too).
        let mut pieces = LargeAssembly::new();
        for f in &frames {
            let mut rest = &f[..];
            for n in [3usize, 5, 7].iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let k = (*n).min(rest.len());
                pieces.push(&rest[..k]).unwrap();
                rest = &rest[k..];
            }
            pieces.end_frame().unwrap();
        }
        assert_eq!(pieces.total(), Some(data.len()));
        assert_eq!(pieces.into_message(), data);
    }

    #[test]
    fn an_empty_message_is_one_frame_of_its_prefix() {
        let mut a = LargeAssembly::new();
        assert!(a.push_frame(&0u64.to_le_bytes()).unwrap());
        assert!(a.into_message().is_empty());
    }

    #[test]
    fn convention_violations_are_errors() {
        let mut a = LargeAssembly::new();
        let e = a.push_frame(&[1, 2, 3]).unwrap_err();
        assert!(matches!(
            e,
            Error::FrameRejected(FrameError::Payload {
                error: DecodeError::Truncated { left: 3, .. },
                ..
            })
        ));
        let mut a = LargeAssembly::new();
        let mut first = 4u64.to_le_bytes().to_vec();
        first.extend_from_slice(&[9; 6]);
        assert!(matches!(
            a.push_frame(&first).unwrap_err(),
            Error::FrameRejected(FrameError::Payload {
                error: DecodeError::TrailingBytes { extra: 2, .. },
                ..
            })
        ));
        let mut a = LargeAssembly::new();
        let mut first = 10u64.to_le_bytes().to_vec();
        first.extend_from_slice(&[9; 4]);
        assert!(!a.push_frame(&first).unwrap());
        assert!(a.push_frame(&[]).is_err(), "an empty continuation");
    }

    proptest::proptest! {
        /// Any message, its frames cut into pieces of any size: the same
        /// bytes come out.
        #[test]
        fn split_then_assemble_in_any_pieces(
            len in 0usize..70_000,
            piece in 1usize..5000,
            seed in proptest::prelude::any::<u8>(),
        ) {
            let data: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed).collect();
            let mut a = LargeAssembly::new();
            let mut done = false;
            for f in frames_of(&data) {
                for p in f.chunks(piece) {
                    a.push(p).unwrap();
                }
                done = a.end_frame().unwrap();
            }
            proptest::prop_assert!(done);
            proptest::prop_assert_eq!(a.into_message(), data);
        }
    }

    #[test]
    fn a_huge_total_reserves_at_most_the_cap() {
        let mut a = LargeAssembly::new();
        a.push(&(1u64 << 40).to_le_bytes()).unwrap();
        assert_eq!(a.total(), Some(1 << 40));
        assert!(a.buf.capacity() <= RESERVE_CAP);
        a.push(&[1, 2, 3]).unwrap();
        assert_eq!(a.received(), 3);
    }
}
