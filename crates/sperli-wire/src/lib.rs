//! # sperli-wire
//!
//! The SPERLI v1 codecs: the job description, the 52-byte frame header and
//! its check order, every frame payload, join tokens, checkpoint files and
//! path names, the refused-host policy and the reductions. No I/O, no
//! threads, no clock, no crypto but SHA-256: a second implementation can be
//! built on this crate alone. The protocol is in `docs/sperli-protocol.md`.
//!
//! Every decoder goes through [`codec::Reader`]; every failure is an
//! [`error::Error`] (or a part of one, one family per file of [`error`])
//! that maps to one H-code, or to none for a failure of the local machine
//! or a misuse of the API; [`error::Error::h_code`] is the one place the
//! codes are written. Code cites `protocol §N`, the sections of
//! `docs/sperli-protocol.md`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod abort;
pub mod binomial_tree;
pub mod bye;
pub mod ckpt_ack;
pub mod ckpt_begin;
pub mod ckpt_chunks;
pub mod ckpt_data;
pub mod ckpt_path;
pub mod codec;
pub mod collective;
pub mod commit_file;
pub mod communicator;
pub mod data;
pub mod data_header;
pub mod description_line;
pub mod element;
pub mod env;
pub mod error;
pub mod failure_record;
pub mod frame;
pub mod frame_type;
pub mod header;
pub mod heartbeat;
pub mod hello;
pub mod hex;
pub mod host;
pub mod ids;
pub mod job_description;
pub mod join_token;
pub mod limits;
pub mod match_notice;
pub mod message_stream;
pub mod owner_fold;
pub mod pair;
pub mod payload;
pub mod pipeline;
pub mod rank_file;
pub mod recovery;
pub mod reduce;
pub mod refused_hosts;
pub mod resume;

pub use codec::{Codec, PutLe, Reader};
pub use element::{ElementType, Reduction};
pub use error::{Error, HCode};
pub use frame_type::FrameType;
pub use ids::{JobId, Sha256Digest};
