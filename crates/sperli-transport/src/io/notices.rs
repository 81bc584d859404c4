//! Sending the match notices the receive state owes (HELLO feature bit 3,
//! protocol §16.5): a receive (or a matched probe) took a synchronous
//! message, so its sender learns it at once.
//!
//! A notice is queued where the match happened (under the receive state's
//! lock, often while the matching thread holds the sender's link to read
//! it), and sent here, by whoever made the match, once it holds no lock.
//! It is not a message: it takes no message number, and it may go between
//! the frames of one of this rank's messages (protocol §16.5).

use std::sync::atomic::Ordering;

use sperli_wire::codec::Codec;
use sperli_wire::match_notice::MatchNotice;
use sperli_wire::FrameType;

use crate::io::shared::{Command, Shared};
use crate::proto::connection::Outgoing;

/// Sends every notice due now. A peer that left gets none (a notice after
/// its BYE would be rejected, protocol §7.6); a socket that fails here is
/// judged by its next read.
pub(crate) fn send_due(shared: &Shared) {
    let due = shared.state().take_notices();
    for n in due {
        let Some(link) = shared.link(n.to) else {
            continue;
        };
        let payload = MatchNotice {
            communicator: n.comm,
            message: n.message,
        }
        .to_vec();
        let header = shared.ctx.header(FrameType::Data, n.to).with_tag(n.tag);
        let mut done = Vec::new();
        let backlog = {
            let mut l = link.lock();
            let ended = shared.error.get().is_some();
            let _ = l.send_now(ended, Outgoing::new(header, payload, 0), &mut |s| {
                done.push(s)
            });
            link.note_backlog(&l)
        };
        shared.mark_written(&mut done);
        if backlog && !link.io_owns.load(Ordering::SeqCst) && !shared.driver.leading() {
            shared.command(Command::Kick { to: n.to });
        }
    }
}
