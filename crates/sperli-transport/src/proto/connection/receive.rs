//! The receiving half of a [`Connection`]: plaintext in, each header
//! judged by the connection's state before its payload is read, accepted
//! frames out to a [`Deliver`].

use std::time::Instant;

use sperli_wire::codec::Codec;
use sperli_wire::error::{AuthError, FrameError, LossCause};
use sperli_wire::header::{FrameHeader, Receiver};
use sperli_wire::heartbeat::Heartbeat;
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

use super::{verify_token, ConnState, Connection, Deliver, Incoming};
use crate::proto::frame_reader::{Frame, FrameReader, FrameSink, PayloadDest};

impl Connection {
    /// Handles plaintext bytes from the peer. `now_ms` is the receiver's
    /// wall clock (Unix ms) for the token expiry. Accepted frames go to
    /// `out`. Any error ends this connection; before HELLO verified it is
    /// the peer's failure to authenticate, afterwards it ends the job.
    pub fn handle_bytes(
        &mut self,
        bytes: &[u8],
        now: Instant,
        now_ms: u64,
        out: &mut dyn Deliver,
    ) -> Result<(), Error> {
        // A pause is asked once per frame end: every call takes more.
        let mut at = self.handle_bytes_pausing(bytes, now, now_ms, out)?.taken;
        while at < bytes.len() {
            at += self
                .handle_bytes_pausing(&bytes[at..], now, now_ms, out)?
                .taken;
        }
        Ok(())
    }

    /// As [`Connection::handle_bytes`], but stops at a frame boundary when
    /// `out` asks for a pause ([`Deliver::pause`]), and always right after
    /// the peer's HELLO verified; returns the bytes taken (the rest is fed
    /// again later) and whether it stopped ([`Fed`]).
    ///
    /// The stop after HELLO is what lets the caller act on
    /// [`Incoming::Authenticated`] before the next frame is judged: from
    /// that frame on the bytes are an authenticated peer's, so a rejected
    /// one ends the job (H1610, ABORT reason 7, protocol §6.2, §7.5)
    /// instead of being taken for a failed authentication, which only
    /// closes the connection (protocol §5.3). Without the stop, a frame
    /// that came in the same read as the HELLO failed the whole read, and
    /// the peer never counted as authenticated.
    pub fn handle_bytes_pausing(
        &mut self,
        bytes: &[u8],
        now: Instant,
        now_ms: u64,
        out: &mut dyn Deliver,
    ) -> Result<Fed, Error> {
        self.last_recv = now;
        if self.state == ConnState::Closed {
            return Err(FrameError::Unexpected {
                frame_type: FrameType::Data,
                when: "after close",
            }
            .into());
        }
        let fresh = FrameReader::new(self.rx());
        let mut reader = std::mem::replace(&mut self.reader, fresh);
        let pre_hello = self.state == ConnState::AwaitingHello;
        let mut judge = Judge {
            conn: self,
            now_ms,
            out,
            hello_verified: false,
            stopped: false,
        };
        let result = reader.feed(bytes, &mut judge);
        let stopped = judge.stopped;
        self.reader = reader;
        match result {
            Ok(taken) => Ok(Fed { taken, stopped }),
            Err(e) => {
                self.state = ConnState::Closed;
                Err(match e {
                    Error::FrameRejected(FrameError::Payload {
                        frame_type: FrameType::Hello,
                        error,
                    }) if pre_hello => Error::Authentication {
                        peer: Some(self.peer),
                        error: AuthError::Hello(error),
                    },
                    e => e,
                })
            }
        }
    }

    pub(super) fn rx(&self) -> Receiver {
        Receiver {
            job_id: self.ctx.job_id,
            own_rank: self.ctx.rank,
            peer_rank: self.peer,
            incarnation: self.peer_incarnation,
            size: self.ctx.size,
            features: self.features,
            membership_epoch: self.ctx.membership.current(),
        }
    }

    /// May a frame of type `t` come now? Judged on its header, before any
    /// payload byte is read (protocol §5.1 step 5, §7.1, §7.6).
    pub(super) fn admit(&self, t: FrameType) -> Result<(), Error> {
        let unexpected = |when| -> Error {
            FrameError::Unexpected {
                frame_type: t,
                when,
            }
            .into()
        };
        match self.state {
            // HELLO first: "Both sides send HELLO immediately after the
            // handshake; nothing may be sent before it." (protocol §5.1
            // step 5)
            ConnState::AwaitingHello if t != FrameType::Hello => Err(unexpected("before HELLO")),
            ConnState::AwaitingHello => Ok(()),
            // Frame after BYE: "A frame after a BYE is rejected." (protocol
            // §7.6)
            ConnState::ByeReceived => Err(unexpected("after BYE")),
            ConnState::Closed => Err(unexpected("after close")),
            // Second HELLO: "A second HELLO on a connection is rejected."
            // (protocol §7.1)
            ConnState::Open if t == FrameType::Hello => Err(unexpected("twice")),
            ConnState::Open => Ok(()),
        }
    }

    fn on_frame(&mut self, f: Frame, now_ms: u64, out: &mut dyn Deliver) -> Result<(), Error> {
        let t = f.header.frame_type;
        self.peer_holds(f.header.membership_epoch);
        let unexpected = |when| -> Error {
            FrameError::Unexpected {
                frame_type: t,
                when,
            }
            .into()
        };
        self.admit(t)?;
        if self.state == ConnState::AwaitingHello {
            let Payload::Hello(hello) = f.decoded() else {
                return Err(unexpected("before HELLO"));
            };
            // "Each side checks the peer's HELLO and join token" (protocol
            // §5.1 step 5); the token's checks are protocol §7.1.2.
            verify_token(&self.ctx, self.peer, &hello.token.to_vec(), now_ms)?;
            self.state = ConnState::Open;
            // Protocol §6.2: until set-up ends, the AND of both HELLOs.
            self.features &= hello.features | sperli_wire::limits::FEATURE_V1_CORE;
            out.incoming(Incoming::Authenticated {
                features: hello.features,
            });
            return Ok(());
        }
        match t {
            FrameType::Hello => Err(unexpected("twice")),
            FrameType::Data => {
                out.incoming(Incoming::Data {
                    tag: f.header.tag,
                    payload: f.payload,
                });
                Ok(())
            }
            FrameType::Collective => {
                out.incoming(Incoming::Collective {
                    tag: f.header.tag,
                    payload: f.payload,
                });
                Ok(())
            }
            FrameType::Heartbeat => {
                let Payload::Heartbeat(Heartbeat { counter }) = f.decoded() else {
                    return Err(unexpected("malformed"));
                };
                // Heartbeat counter: "1 on the first HEARTBEAT the sender
                // sends on this connection, then +1 for each; any other
                // value is rejected (H1610)" (protocol §7.4)
                let expected = self.hb_recv + 1;
                if counter != expected {
                    return Err(FrameError::HeartbeatCounter {
                        expected,
                        got: counter,
                    }
                    .into());
                }
                self.hb_recv = counter;
                Ok(())
            }
            FrameType::Abort => {
                let Payload::Abort(a) = f.decoded() else {
                    return Err(unexpected("malformed"));
                };
                // "A rank that receives ABORT forwards nothing, closes all
                // its connections (without BYE) and ends the job step with
                // H1612." (protocol §7.5)
                self.state = ConnState::Closed;
                Err(Error::AbortedByPeer {
                    from: self.peer,
                    reason: a.reason.code(),
                    code: a.code,
                    message: a.message_lossy().into_owned(),
                })
            }
            FrameType::Bye => {
                // "A rank whose peers have all said BYE ends normally."
                // (protocol §7.6)
                self.state = ConnState::ByeReceived;
                out.incoming(Incoming::Bye);
                Ok(())
            }
            FrameType::Recover => {
                // Protocol §18.5: decoded and judged by the rank's recovery.
                out.incoming(Incoming::Recover {
                    membership_epoch: f.header.membership_epoch,
                    payload: f.payload,
                });
                Ok(())
            }
            FrameType::CkptBegin
            | FrameType::CkptData
            | FrameType::CkptAck
            | FrameType::CkptCommit
            | FrameType::Resume => {
                out.incoming(Incoming::Checkpoint(f.header, f.payload));
                Ok(())
            }
        }
    }

    /// An orderly close (FIN, or TLS close_notify) from the peer: normal
    /// after BYE, otherwise the peer is lost: "A close without BYE is a lost
    /// peer (H1613, ABORT reason 1)." (protocol §7.6)
    pub fn handle_close(&mut self) -> Result<(), Error> {
        self.handle_end(LossCause::ClosedWithoutBye)
    }

    /// A reset (or another socket error) from the peer's side.
    pub fn handle_reset(&mut self, cause: LossCause) -> Result<(), Error> {
        self.handle_end(cause)
    }

    /// The connection ended from the peer's side: normal after its BYE (or
    /// ours), else the peer is lost with `cause` (protocol §7.6).
    fn handle_end(&mut self, cause: LossCause) -> Result<(), Error> {
        let was = self.state;
        self.state = ConnState::Closed;
        match was {
            ConnState::ByeReceived | ConnState::Closed => Ok(()),
            _ => Err(Error::PeerLost {
                peer: self.peer,
                cause,
            }),
        }
    }
}

/// The [`FrameSink`] of one `handle_bytes` call: the connection judges
/// each header by its state and delivers what it accepts.
struct Judge<'a> {
    conn: &'a mut Connection,
    now_ms: u64,
    out: &'a mut dyn Deliver,
    /// The frame just completed was the peer's HELLO, and it verified:
    /// the feed stops there (see [`Connection::handle_bytes_pausing`]).
    hello_verified: bool,
    /// The feed stopped at a frame boundary.
    stopped: bool,
}

/// What one [`Connection::handle_bytes_pausing`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Bytes taken; the rest is fed again later.
    pub taken: usize,
    /// The feed stopped at a frame boundary (the sink asked for a pause,
    /// or the peer's HELLO just verified): the caller acts on it before it
    /// feeds anything more, even when `taken` is every byte it gave (the
    /// next bytes may come in its next chunk).
    pub stopped: bool,
}

impl FrameSink for Judge<'_> {
    fn header(&mut self, header: &FrameHeader) -> Result<PayloadDest, Error> {
        self.conn.admit(header.frame_type)?;
        let stream = header.frame_type == FrameType::Data
            && self.conn.state == ConnState::Open
            && self.out.stream(header.tag, header.length as usize);
        Ok(if stream {
            PayloadDest::Stream
        } else {
            PayloadDest::Collect
        })
    }

    fn chunk(&mut self, _: &FrameHeader, bytes: &[u8]) {
        self.out.chunk(bytes);
    }

    fn end_stream(&mut self, header: &FrameHeader) -> Result<(), Error> {
        self.out.end_stream(header.tag);
        Ok(())
    }

    fn frame(&mut self, frame: Frame) -> Result<(), Error> {
        let before = self.conn.state;
        self.conn.on_frame(frame, self.now_ms, self.out)?;
        self.hello_verified =
            before == ConnState::AwaitingHello && self.conn.state == ConnState::Open;
        Ok(())
    }

    fn pause(&mut self) -> bool {
        // Both are asked: the sink's own pause is taken either way.
        let asked = self.out.pause();
        let stop = std::mem::take(&mut self.hello_verified) || asked;
        self.stopped |= stop;
        stop
    }

    fn features(&self) -> Option<u64> {
        Some(self.conn.features)
    }

    fn membership_epoch(&self) -> u32 {
        self.conn.ctx.membership.current()
    }
}
