//! The sans-I/O core of the transport: no sockets, no threads, no clock of
//! its own (every `handle_*` and `poll_*` takes `now`), so every rule here
//! is unit-tested with a fake clock and without a socket.
//!
//! - [`frame_reader`]: bytes to checked frames (protocol §6).
//! - [`connection`]: one peer's connection: HELLO first, heartbeats,
//!   silence, ABORT, BYE (protocol §5, §7).
//! - [`setup`]: whom to dial when, which rank an accepted connection may
//!   be, the set-up deadline (protocol §5).
//! - [`close_grace`]: a close without BYE waits a moment for the ABORT that
//!   explains it (protocol §7.5).
//! - [`ending`]: the end of a job step: which ABORT goes out, the linger,
//!   whether the process ends (protocol §7.5).
//! - [`matching`]: messages to receives, the queues of early frames, the
//!   peers that left (protocol §6.5, §8.8).
//! - [`large`]: the `send_large` convention (crate docs).
//! - [`recovery`]: feature bit 5, a lost rank costs one process (protocol §18).

pub mod close_grace;
pub mod connection;
pub mod ending;
pub mod frame_reader;
pub mod large;
pub mod matching;
pub mod recovery;
pub mod setup;
