//! The I/O edge of the transport: the pollers, the sockets, rustls's
//! `read_tls`/`write_tls`, and the threads (crate docs, "Architecture").

pub(crate) mod deliver;
pub(crate) mod driver;
pub(crate) mod event_loop;
pub(crate) mod fatal;
pub(crate) mod link;
pub(crate) mod notices;
pub(crate) mod recovery;
pub(crate) mod service;
pub(crate) mod setup;
pub(crate) mod shared;
