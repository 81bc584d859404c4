//! What a receiver holds for one connection in a job with HELLO feature
//! bit 3, and the checks of protocol §16.4 that need it: the message
//! numbers and frames of the peer's messages, the communicator a message
//! names (kept, kept pending, or rejected), and the match notices of this
//! rank's own synchronous messages.
//!
//! Pure state driven by the frames as they arrive; every failure is a
//! [`MessageError`] (H1610, ABORT reason 7).

use std::collections::BTreeMap;

use crate::communicator::Communicators;
use crate::data_header::{DataHeader, DataKind};
use crate::error::MessageError;
use crate::limits::MAX_MESSAGE_FRAME_DATA;

/// Where a message goes (protocol §16.4, check 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Kept for its communicator, which this rank holds with the sender as
    /// a member: receives on it may take the message.
    Keep,
    /// Kept pending: a communicator id above this rank's highest, in a job
    /// with feature bit 2; judged again when the highest grows.
    Pending,
}

/// Protocol §16.4 check 4, also the judgement of a pending message when
/// this rank's highest has grown: where a message of job rank `from`
/// (number `message`) for `communicator` goes. `can_make` is whether the
/// job negotiated a way to make communicators (feature bit 2).
///
/// ```
/// use sperli_wire::communicator::Communicators;
/// use sperli_wire::message_stream::{route, Route};
/// struct Mine;
/// impl Communicators for Mine {
///     fn has_member(&self, id: u32, rank: u32) -> Option<bool> {
///         (id == 0 || id == 4).then_some(id == 0 || rank < 2)
///     }
///     fn highest(&self) -> u32 { 4 }
///     fn making(&self) -> bool { false }
/// }
/// assert_eq!(route(4, 1, 1, &Mine, true), Ok(Route::Keep));
/// assert_eq!(route(6, 1, 1, &Mine, true), Ok(Route::Pending)); // being made
/// assert!(route(4, 3, 1, &Mine, true).is_err()); // rank 3 is not in 4
/// assert!(route(2, 1, 1, &Mine, true).is_err()); // left behind
/// assert!(route(6, 1, 1, &Mine, false).is_err()); // no communicators in this job
/// ```
pub fn route(
    communicator: u32,
    from: u32,
    message: u64,
    known: &impl Communicators,
    can_make: bool,
) -> Result<Route, MessageError> {
    match known.has_member(communicator, from) {
        Some(true) => Ok(Route::Keep),
        None if communicator == 0 => Ok(Route::Keep),
        None if can_make && communicator > known.highest() => Ok(Route::Pending),
        _ => Err(MessageError::Communicator {
            message,
            communicator,
            from,
            highest: known.highest(),
        }),
    }
}

/// What one accepted DATA frame was (protocol §16.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A frame of message `message`, which goes where `route` says.
    Message {
        /// The message number.
        message: u64,
        /// Whether this is the message's first frame.
        first: bool,
        /// Whether this frame completes the message.
        last: bool,
        /// Where the message goes (judged at its first frame).
        route: Route,
    },
    /// A match notice: this rank's synchronous message `message` was
    /// matched; its send may complete (protocol §16.5).
    Notice {
        /// The message it answers.
        message: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Coming {
    tag: u32,
    header: DataHeader,
    received: u64,
    route: Route,
}

/// One connection's DATA state at a receiver with feature bit 3: the
/// peer's message numbers and the message still coming, and this rank's
/// synchronous messages to the peer that wait for their notice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageStream {
    max_data: u64,
    last: u64,
    coming: Option<Coming>,
    waiting: BTreeMap<u64, (u32, u32)>,
}

impl MessageStream {
    /// A new connection: no message yet (the first is number 1), frames
    /// of 16777192 data bytes.
    pub fn new() -> Self {
        Self::with_frame_data(MAX_MESSAGE_FRAME_DATA as u64)
    }

    /// As [`new`](Self::new) with another frame data length (tests and
    /// vectors describe messages of several frames without 16 MiB frames).
    pub fn with_frame_data(max_data: u64) -> Self {
        Self {
            max_data: max_data.max(1),
            ..Self::default()
        }
    }

    /// Records that this rank sent synchronous message `message` on
    /// `communicator` with `tag` to the peer: its notice is now due.
    pub fn sent_synchronous(&mut self, message: u64, communicator: u32, tag: u32) {
        self.waiting.insert(message, (communicator, tag));
    }

    /// The synchronous messages that wait for their notice.
    pub fn waiting(&self) -> impl Iterator<Item = u64> + '_ {
        self.waiting.keys().copied()
    }

    /// Judges one decoded DATA frame of job rank `from` (header `tag`,
    /// DATA header `h`, `len` data bytes) by the checks of protocol §16.4
    /// in their order: `continuation`, `message_number`, `length`,
    /// `communicator` (a first frame), `notice`, `notice_fields`. On an
    /// error the state is unchanged (the connection is rejected anyway).
    pub fn arrive(
        &mut self,
        tag: u32,
        h: &DataHeader,
        len: usize,
        from: u32,
        known: &impl Communicators,
        can_make: bool,
    ) -> Result<Arrival, MessageError> {
        if h.kind == DataKind::Notice {
            return self.notice(tag, h);
        }
        let len = len as u64;
        let (first, received, route) = match self.coming {
            Some(c) => {
                let differs = [
                    (
                        "communicator",
                        u64::from(c.header.communicator),
                        u64::from(h.communicator),
                    ),
                    (
                        "kind",
                        u64::from(c.header.kind.code()),
                        u64::from(h.kind.code()),
                    ),
                    ("message", c.header.message, h.message),
                    ("total", c.header.total, h.total),
                    ("tag", u64::from(c.tag), u64::from(tag)),
                ]
                .into_iter()
                .find(|(_, a, b)| a != b);
                if let Some((field, expected, got)) = differs {
                    return Err(MessageError::Continuation {
                        message: c.header.message,
                        field,
                        expected,
                        got,
                    });
                }
                (false, c.received, c.route)
            }
            None => {
                let due = self.last + 1;
                if h.message != due {
                    return Err(MessageError::MessageNumber {
                        expected: due,
                        got: h.message,
                    });
                }
                (true, 0, Route::Keep)
            }
        };
        let expected = self.max_data.min(h.total - received);
        if len != expected {
            return Err(MessageError::Length {
                message: h.message,
                expected,
                got: len,
            });
        }
        let route = if first {
            route_of(h, from, known, can_make)?
        } else {
            route
        };
        let received = received + len;
        let last = received == h.total;
        if first {
            self.last = h.message;
        }
        self.coming = (!last).then_some(Coming {
            tag,
            header: *h,
            received,
            route,
        });
        Ok(Arrival::Message {
            message: h.message,
            first,
            last,
            route,
        })
    }

    fn notice(&mut self, tag: u32, h: &DataHeader) -> Result<Arrival, MessageError> {
        let Some(&(communicator, msg_tag)) = self.waiting.get(&h.message) else {
            return Err(MessageError::Notice { message: h.message });
        };
        for (field, expected, got) in [
            ("communicator", communicator, h.communicator),
            ("tag", msg_tag, tag),
        ] {
            if expected != got {
                return Err(MessageError::NoticeFields {
                    message: h.message,
                    field,
                    expected,
                    got,
                });
            }
        }
        self.waiting.remove(&h.message);
        Ok(Arrival::Notice { message: h.message })
    }
}

fn route_of(
    h: &DataHeader,
    from: u32,
    known: &impl Communicators,
    can_make: bool,
) -> Result<Route, MessageError> {
    route(h.communicator, from, h.message, known, can_make)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Communicators 0 (everyone) and 3 = {0, 1}; highest 3.
    struct Known;
    impl Communicators for Known {
        fn has_member(&self, id: u32, rank: u32) -> Option<bool> {
            match id {
                0 => Some(true),
                3 => Some(rank < 2),
                _ => None,
            }
        }
        fn highest(&self) -> u32 {
            3
        }
        fn making(&self) -> bool {
            false
        }
    }

    fn h(communicator: u32, kind: DataKind, message: u64, total: u64) -> DataHeader {
        DataHeader {
            communicator,
            kind,
            message,
            total,
        }
    }
    const S: DataKind = DataKind::Standard;
    const Y: DataKind = DataKind::Synchronous;
    const N: DataKind = DataKind::Notice;

    #[test]
    fn messages_of_several_frames_with_a_notice_between() {
        let mut s = MessageStream::with_frame_data(4);
        s.sent_synchronous(1, 3, 9);
        let a = s.arrive(5, &h(3, Y, 1, 10), 4, 1, &Known, true).unwrap();
        assert_eq!(
            a,
            Arrival::Message {
                message: 1,
                first: true,
                last: false,
                route: Route::Keep
            }
        );
        assert_eq!(
            s.arrive(9, &h(3, N, 1, 0), 0, 1, &Known, true),
            Ok(Arrival::Notice { message: 1 })
        );
        assert!(s.arrive(5, &h(3, Y, 1, 10), 4, 1, &Known, true).is_ok());
        let e = s
            .arrive(5, &h(3, Y, 1, 10), 3, 1, &Known, true)
            .unwrap_err();
        assert_eq!(e.check(), "length");
        assert!(matches!(
            s.arrive(5, &h(3, Y, 1, 10), 2, 1, &Known, true),
            Ok(Arrival::Message { last: true, .. })
        ));
        // The notice was used up: a second one names no waiting message.
        let e = s.arrive(9, &h(3, N, 1, 0), 0, 1, &Known, true).unwrap_err();
        assert_eq!(e.check(), "notice");
        assert!(s.arrive(0, &h(0, S, 2, 0), 0, 1, &Known, true).is_ok());
    }

    #[test]
    fn every_check_word() {
        let mut s = MessageStream::with_frame_data(4);
        s.sent_synchronous(7, 3, 9);
        let check = |s: &mut MessageStream, tag, hd: DataHeader, len, from| {
            s.arrive(tag, &hd, len, from, &Known, true)
                .map_err(|e| e.check())
        };
        assert_eq!(check(&mut s, 1, h(0, S, 2, 1), 1, 1), Err("message_number"));
        assert_eq!(check(&mut s, 1, h(0, S, 1, 5), 3, 1), Err("length"));
        assert_eq!(check(&mut s, 1, h(3, S, 1, 1), 1, 2), Err("communicator"));
        assert_eq!(check(&mut s, 1, h(2, S, 1, 1), 1, 1), Err("communicator"));
        assert_eq!(
            check(&mut s, 1, h(8, S, 1, 1), 1, 1),
            Ok(Arrival::Message {
                message: 1,
                first: true,
                last: true,
                route: Route::Pending
            })
        );
        assert!(check(&mut s, 1, h(0, S, 2, 6), 4, 1).is_ok());
        assert_eq!(check(&mut s, 2, h(0, S, 2, 6), 2, 1), Err("continuation"));
        assert_eq!(check(&mut s, 1, h(0, Y, 2, 6), 2, 1), Err("continuation"));
        assert_eq!(check(&mut s, 1, h(0, S, 3, 6), 2, 1), Err("continuation"));
        assert_eq!(check(&mut s, 9, h(0, N, 7, 0), 0, 1), Err("notice_fields"));
        assert_eq!(check(&mut s, 9, h(3, N, 6, 0), 0, 1), Err("notice"));
        assert!(check(&mut s, 1, h(0, S, 2, 6), 2, 1).is_ok());
        // Without bit 2 an unknown id is never pending.
        assert!(s.arrive(1, &h(8, S, 3, 0), 0, 1, &Known, false).is_err());
    }

    #[test]
    fn every_proper_prefix_of_a_frame_is_refused() {
        use crate::codec::Codec;
        use crate::data_header::DataFrame;
        let frame = DataFrame {
            header: h(0, S, 1, 6),
            data: b"abcdef",
        }
        .to_vec();
        for n in 0..frame.len() {
            let refused = match DataFrame::decode(&frame[..n]) {
                Err(_) => true,
                Ok(f) => MessageStream::new()
                    .arrive(0, &f.header, f.data.len(), 1, &Known, true)
                    .is_err(),
            };
            assert!(refused, "prefix of {n} bytes");
        }
    }

    proptest! {
        /// Any series of messages, cut into frames as protocol §16.2 says,
        /// is accepted frame by frame, each message once complete.
        #[test]
        fn well_formed_series_are_accepted(lens in proptest::collection::vec(0u64..20, 1..8), max in 1u64..6) {
            let mut s = MessageStream::with_frame_data(max);
            for (i, &total) in lens.iter().enumerate() {
                let hd = h(0, S, i as u64 + 1, total);
                let frames = DataHeader::frames_of_with(total, max);
                let mut left = total;
                for f in 0..frames {
                    let len = left.min(max);
                    left -= len;
                    let a = s.arrive(4, &hd, len as usize, 1, &Known, true).unwrap();
                    prop_assert_eq!(a, Arrival::Message { message: hd.message, first: f == 0, last: f + 1 == frames, route: Route::Keep });
                }
            }
        }
    }
}
