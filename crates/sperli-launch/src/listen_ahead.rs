//! Listening sockets the launcher binds for the ranks it starts directly
//! (protocol §5.1 step 1: "a rank listens on its port before anything
//! else"), before it starts any of them, and hands to each rank as an
//! inherited descriptor ([`LISTEN_FD`], named in
//! [`sperli_transport::inherited::LISTEN_FD_ENV`]). A rank started later
//! than its peers then finds their dials queued in its listener instead
//! of refused: a refused dial is tried again only 100 ms later (protocol
//! §5.1 step 2), a step in the job's start-up.

use std::net::TcpListener;
use std::os::fd::OwnedFd;

/// The descriptor number a rank finds its listener at (the control channel
/// is at 3).
pub const LISTEN_FD: i32 = 4;

/// The backlog: a rank's lower peers may all dial before it accepts (an
/// overflowing backlog drops SYNs, which TCP sends again only a second
/// later).
const BACKLOG: i32 = 4096;

/// Descriptors below this are left alone: the copy handed over lives
/// above them, so that moving another descriptor to 3 or 4 in the child
/// cannot overwrite it first.
const ABOVE: i32 = 10;

/// A listener on `host:port` for a rank (`host` a loopback address or
/// `localhost`), close-on-exec, at a descriptor of 10 or above. `None`
/// when it cannot be bound (the port is taken): the rank binds its own and
/// says why it cannot.
pub fn bind(host: &str, port: u16) -> Option<OwnedFd> {
    let addr = sperli_tls::job_plan::listen_addr(host);
    let l = TcpListener::bind((addr, port)).ok()?;
    nix::sys::socket::listen(&l, nix::sys::socket::Backlog::new(BACKLOG).ok()?).ok()?;
    crate::os::dup_at_least(&l, ABOVE).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_bound_port_queues_dials_and_a_taken_one_is_none() {
        let fd = bind("127.0.0.1", 0).expect("a free port");
        assert!(fd.as_raw_fd() >= ABOVE);
        let l = TcpListener::from(fd);
        let port = l.local_addr().unwrap().port();
        // Nobody accepts yet: the dial is queued, not refused.
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert!(bind("127.0.0.1", port).is_none(), "taken");
        assert!(l.accept().is_ok());
    }
}
