//! Where the frames a socket read yields go: into the rank's [`Matching`]
//! state, in the order they came, by whichever thread read them.
//!
//! Lock order: a link's lock, then the state's lock; never the other way
//! round. A batch's frames are delivered under both, so two threads that
//! read the same socket one after the other cannot reorder its frames.
//! Waking the waiters is left to the reader, once it released the locks.

use sperli_wire::limits::DATA_HEADER_LEN;

use crate::io::shared::Shared;
use crate::proto::connection::{Deliver, Incoming};
use crate::proto::large::LargeAssembly;
use crate::proto::matching::RecvId;

/// A DATA frame streaming as it is read.
#[derive(Debug)]
pub(crate) enum Streaming {
    /// Without feature bit 3: straight into a large receive's assembly.
    Large {
        id: RecvId,
        tag: u32,
        asm: LargeAssembly,
        /// A piece the assembly refused: the rest of the frame is dropped
        /// and the receive fails with it.
        error: Option<sperli_wire::Error>,
    },
    /// With feature bit 3 (protocol §16.2): every DATA frame. Its DATA
    /// header is judged as soon as its 24 bytes are in, then its data goes
    /// straight to where its message goes (one copy, from TLS).
    Message {
        tag: u32,
        head: [u8; DATA_HEADER_LEN],
        head_len: usize,
        data_len: usize,
        /// The header was judged (and accepted, unless `failed`).
        judged: bool,
        failed: bool,
    },
}

impl Streaming {
    /// The frame was cut short (the connection ended inside it): a large
    /// receive fails with `error` (a message's receive fails when the
    /// connection's loss ends the job).
    pub fn cut(self, shared: &Shared, peer: u32, error: sperli_wire::Error) {
        if let Streaming::Large { id, tag, asm, .. } = self {
            let mut st = shared.state();
            st.end_stream(id, peer, tag, asm, Some(error));
            drop(st);
            shared.bump();
        }
    }
}

/// The [`Deliver`] of one read batch of an authenticated peer's socket.
pub(crate) struct ToMatching<'a> {
    shared: &'a Shared,
    peer: u32,
    pending: Vec<Incoming>,
    /// The frame streaming now (taken out of the link for the batch).
    pub stream: Option<Streaming>,
    /// The peer's HELLO verified: its feature bits (set-up only).
    pub authenticated: Option<u64>,
    /// Something was delivered: the waiters must look.
    pub delivered: bool,
    /// A large receive's frame ended: the read pauses there, so the
    /// waiter can post its next receive before the next header is matched
    /// (the next frame then streams too, instead of being copied later).
    paused: bool,
    /// Set-up: frames are held until the connection counts (a second
    /// connection for a rank does not, protocol §5.3), then [`ToMatching::flush`]ed
    /// or dropped; nothing streams.
    pub hold: bool,
    /// A delivered frame the receive state rejected (with feature bit 3,
    /// protocol §16.2, §16.4): the connection fails with it.
    pub rejected: Option<sperli_wire::Error>,
    /// What was delivered matched synchronous messages: notices are due.
    pub notices: bool,
}

impl<'a> ToMatching<'a> {
    pub fn new(shared: &'a Shared, peer: u32, stream: Option<Streaming>) -> Self {
        Self {
            shared,
            peer,
            pending: Vec::new(),
            stream,
            authenticated: None,
            delivered: false,
            paused: false,
            hold: false,
            rejected: None,
            notices: false,
        }
    }

    /// Delivers what the batch collected (call before the link's lock is
    /// released).
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut st = self.shared.state();
        let mut recover = false;
        for inc in self.pending.drain(..) {
            if self.rejected.is_some() {
                break; // the connection fails: nothing after it counts
            }
            let r = match (inc, &self.shared.recovery) {
                (
                    Incoming::Recover {
                        membership_epoch,
                        payload,
                    },
                    Some(rec),
                ) => {
                    recover = true;
                    let (size, m) = (self.shared.ctx.size, &self.shared.ctx.membership);
                    rec.frame(self.peer, membership_epoch, &payload, size, &mut st, m)
                }
                (inc, _) => st.handle_incoming(self.peer, inc),
            };
            if let Err(e) = r {
                self.rejected = Some(e);
            }
        }
        self.notices |= st.notices_due();
        drop(st);
        if recover {
            self.shared.command(crate::io::shared::Command::Recovery);
        }
        self.shared.bump();
        self.delivered = true;
    }
}

impl Deliver for ToMatching<'_> {
    fn incoming(&mut self, inc: Incoming) {
        match inc {
            Incoming::Authenticated { features } => self.authenticated = Some(features),
            // The read stops after a RECOVER frame: a record it carries is
            // applied before the next header is judged (protocol §18.2
            // check 5, §18.6).
            inc @ Incoming::Recover { .. } => {
                self.pending.push(inc);
                self.paused = true;
            }
            inc => self.pending.push(inc),
        }
    }

    fn stream(&mut self, tag: u32, len: usize) -> bool {
        if self.hold {
            return false;
        }
        // Frames before this one first: a receive posted for this tag may
        // be theirs.
        self.flush();
        let mut st = self.shared.state();
        if st.has_p2p_communicators() {
            self.stream = Some(Streaming::Message {
                tag,
                head: [0; DATA_HEADER_LEN],
                head_len: 0,
                data_len: len.saturating_sub(DATA_HEADER_LEN),
                judged: false,
                failed: false,
            });
            return true;
        }
        let started = st.start_stream(self.peer, tag);
        match started {
            Some((id, asm)) => {
                self.stream = Some(Streaming::Large {
                    id,
                    tag,
                    asm,
                    error: None,
                });
                true
            }
            None => false,
        }
    }

    fn chunk(&mut self, mut bytes: &[u8]) {
        match self.stream.as_mut() {
            Some(Streaming::Large { asm, error, .. }) if error.is_none() => {
                if let Err(e) = asm.push(bytes) {
                    *error = Some(e);
                }
            }
            Some(Streaming::Message {
                tag,
                head,
                head_len,
                data_len,
                judged,
                failed,
            }) => {
                if *failed {
                    return;
                }
                if !*judged {
                    let n = (DATA_HEADER_LEN - *head_len).min(bytes.len());
                    head[*head_len..*head_len + n].copy_from_slice(&bytes[..n]);
                    *head_len += n;
                    bytes = &bytes[n..];
                    if *head_len < DATA_HEADER_LEN {
                        return;
                    }
                    *judged = true;
                    let pool = &self.shared.pool;
                    let mut st = self.shared.state();
                    let r =
                        st.message_header(self.peer, *tag, &head[..], *data_len, |n| pool.take(n));
                    self.notices |= st.notices_due();
                    let spare = st.take_spare();
                    drop(st);
                    for b in spare {
                        self.shared.pool.put(b);
                    }
                    if let Err(e) = r {
                        *failed = true;
                        self.rejected = Some(e);
                        return;
                    }
                }
                if !bytes.is_empty() {
                    self.shared.state().message_data(self.peer, bytes);
                }
            }
            _ => {}
        }
    }

    fn end_stream(&mut self, _tag: u32) {
        match self.stream.take() {
            Some(Streaming::Large {
                id,
                tag,
                asm,
                error,
            }) => {
                let mut st = self.shared.state();
                st.end_stream(id, self.peer, tag, asm, error);
                drop(st);
                self.shared.bump();
                self.delivered = true;
                self.paused = true;
            }
            Some(Streaming::Message {
                tag,
                head,
                head_len,
                judged,
                failed,
                ..
            }) => {
                if failed {
                    return;
                }
                let mut st = self.shared.state();
                if !judged {
                    // A payload shorter than the DATA header: decode rule 1
                    // (protocol §16.2) rejects it.
                    let pool = &self.shared.pool;
                    let r =
                        st.message_header(self.peer, tag, &head[..head_len], 0, |n| pool.take(n));
                    if let Err(e) = r {
                        self.rejected = Some(e);
                        return;
                    }
                }
                st.message_end(self.peer);
                drop(st);
                self.shared.bump();
                self.delivered = true;
            }
            None => {}
        }
    }

    fn pause(&mut self) -> bool {
        // A rejected frame stops the read: the connection fails with it.
        std::mem::take(&mut self.paused) || self.rejected.is_some()
    }
}
