//! The integration tests of sperli-collective, one binary (protocol §8,
//! §8.3 and §8.8):
//!
//! - [`fake`]: multi-rank runs over the in-memory fake link;
//! - [`tls`]: the same collectives between real ranks, each an `Endpoint`
//!   of a TLS 1.3 mesh on 127.0.0.0/8, every test under a
//!   watchdog so it can never hang;
//! - [`vcoll`]: the v-collectives on both (protocol §8.9);
//! - [`scan`]: scan and exscan (protocol §8.9);
//! - [`groups_topologies`]: groups, communicators from groups, COMM_SELF
//!   and Cartesian grids on the fake link;
//! - [`p2p_semantics`]: PROC_NULL, persistent requests, point-to-point on
//!   COMM_SELF and along a Cartesian grid between real TLS ranks;
//! - [`p2p_communicators`]: messages matched by communicator, synchronous
//!   sends and matched probes (HELLO feature bit 3) between TLS ranks;
//! - [`intercomm`]: intercommunicators and merge between TLS ranks;
//! - [`intercomm_collectives`]: the collectives across the two groups of
//!   an intercommunicator, its dup and split, between TLS ranks;
//! - [`bit4_fake`], [`bit4_tls`]: the element types and reductions of
//!   HELLO feature bit 4 (protocol §17) against [`bit4_ref`]'s serial
//!   fold, and jobs where a rank lacks the bit;
//! - [`user_tls`]: user-defined reductions (protocol §17.4) against a
//!   serial left fold, between TLS ranks.
//! - [`owner_fold`]: the owner-fold allreduce of HELLO feature bit 7
//!   (protocol §20) against the serial left fold, its frames, a job where
//!   a rank lacks the bit, and its receiver checks, on both links.
//! - [`binomial_tree`]: the binomial bcast of HELLO feature bit 8
//!   (protocol §21): who sends a bcast's first frame to whom, a job where a
//!   rank lacks the bit, communicators, a relay's length check, on both
//!   links.
//! - [`ulfm`]: ULFM's revoke, agree, iagree and shrink (protocol §18.8.1)
//!   between TLS ranks.

mod any_length;
mod api;
mod binomial_tree;
mod bit4_fake;
mod bit4_ref;
mod bit4_tls;
mod common;
mod communicators;
mod fake;
mod groups_topologies;
mod intercomm;
mod intercomm_collectives;
mod owner_fold;
mod p2p_communicators;
mod p2p_semantics;
mod pair;
mod pipelined_fake;
mod pipelined_tls;
mod scan;
mod tls;
mod ulfm;
mod user_tls;
mod vcoll;
