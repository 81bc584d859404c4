//! Where the frames a socket read yields go: into the rank's [`Matching`]
//! state, in the order they came, by whichever thread read them.
//!
//! Lock order: a link's lock, then the state's lock; never the other way
//! round. A batch's frames are delivered under both, so two threads that
//! read the same socket one after the other cannot reorder its frames.
//! Waking the waiters is left to the reader, once it released the locks.

use crate::io::shared::Shared;
use crate::proto::connection::{Deliver, Incoming};
use crate::proto::large::LargeAssembly;
use crate::proto::matching::RecvId;

/// A DATA frame streaming straight into a large receive's assembly.
#[derive(Debug)]
pub(crate) struct Streaming {
    id: RecvId,
    tag: u32,
    asm: LargeAssembly,
    /// A piece the assembly refused: the rest of the frame is dropped and
    /// the receive fails with it.
    error: Option<sperli_wire::Error>,
}

impl Streaming {
    /// The frame was cut short (the connection ended inside it): the
    /// receive fails with `error`.
    pub fn cut(self, shared: &Shared, peer: u32, error: sperli_wire::Error) {
        let mut st = shared.state();
        st.end_stream(self.id, peer, self.tag, self.asm, Some(error));
        drop(st);
        shared.bump();
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
        for inc in self.pending.drain(..) {
            if self.rejected.is_some() {
                break; // the connection fails: nothing after it counts
            }
            if let Err(e) = st.handle_incoming(self.peer, inc) {
                self.rejected = Some(e);
            }
        }
        self.notices |= st.notices_due();
        drop(st);
        self.shared.bump();
        self.delivered = true;
    }
}

impl Deliver for ToMatching<'_> {
    fn incoming(&mut self, inc: Incoming) {
        match inc {
            Incoming::Authenticated { features } => self.authenticated = Some(features),
            inc => self.pending.push(inc),
        }
    }

    fn stream(&mut self, tag: u32, _len: usize) -> bool {
        if self.hold {
            return false;
        }
        // Frames before this one first: a receive posted for this tag may
        // be theirs.
        self.flush();
        let started = self.shared.state().start_stream(self.peer, tag);
        match started {
            Some((id, asm)) => {
                self.stream = Some(Streaming {
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

    fn chunk(&mut self, bytes: &[u8]) {
        if let Some(s) = self.stream.as_mut() {
            if s.error.is_none() {
                if let Err(e) = s.asm.push(bytes) {
                    s.error = Some(e);
                }
            }
        }
    }

    fn end_stream(&mut self, _tag: u32) {
        if let Some(s) = self.stream.take() {
            let mut st = self.shared.state();
            st.end_stream(s.id, self.peer, s.tag, s.asm, s.error);
            drop(st);
            self.shared.bump();
            self.delivered = true;
            self.paused = true;
        }
    }

    fn pause(&mut self) -> bool {
        std::mem::take(&mut self.paused)
    }
}
