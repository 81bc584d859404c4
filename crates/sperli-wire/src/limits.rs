//! The fixed numbers of v1 (protocol §1.3).

/// Frame header length in bytes.
pub const HEADER_LEN: usize = 52;
/// Largest frame payload: 16 MiB.
pub const MAX_PAYLOAD: u32 = 16 * 1024 * 1024;
/// The collective header length.
pub const COLLECTIVE_HEADER_LEN: usize = 16;
/// Largest collective data: the largest payload less the collective header.
pub const MAX_COLLECTIVE_DATA: usize = MAX_PAYLOAD as usize - COLLECTIVE_HEADER_LEN;
/// Largest CKPT_DATA chunk: 1 MiB.
pub const MAX_CKPT_CHUNK: usize = 1024 * 1024;
/// Ranks in a job: 1..=4096.
pub const MAX_SIZE: u32 = 4096;
/// Largest user tag; tags from 2^31 on are reserved.
pub const MAX_USER_TAG: u32 = 0x7fff_ffff;
/// Longest host name.
pub const MAX_HOST_LEN: usize = 253;
/// Longest ABORT message in bytes.
pub const MAX_ABORT_MESSAGE: usize = 1024;
/// CompositeSig public key length.
pub const PUBLIC_KEY_LEN: usize = 1344;
/// CompositeSig signature length.
pub const SIGNATURE_LEN: usize = 2484;
/// CompositeSig secret key length (ML-DSA seed, Ed25519 seed).
pub const SECRET_KEY_LEN: usize = 64;
/// Protocol version in HELLO, the job description, CKPT_BEGIN and files.
pub const PROTOCOL_VERSION: u16 = 1;
/// HELLO feature bit 0: the v1 core (protocol §7.1.1).
pub const FEATURE_V1_CORE: u64 = 1;
/// HELLO feature bit 1: pipelined collectives (protocol §7.1.1, §14).
pub const FEATURE_PIPELINED: u64 = 1 << 1;
/// HELLO feature bit 2: communicators (protocol §7.1.1, §15): the
/// communicator id in a COLLECTIVE frame's header tag.
pub const FEATURE_COMMUNICATORS: u64 = 1 << 2;
/// The largest communicator id (protocol §15.2); 0 is the job's own.
pub const MAX_COMMUNICATOR_ID: u32 = 0x7fff_ffff;
/// HELLO feature bit 3: point-to-point on communicators (protocol
/// §7.1.1, §16): every DATA payload starts with the 24-byte DATA header.
pub const FEATURE_P2P_COMMUNICATORS: u64 = 1 << 3;
/// HELLO feature bit 4: more element types and reductions (protocol
/// §7.1.1, §17): element types 7..=17, reductions 11..=13.
pub const FEATURE_ELEMENT_TYPES: u64 = 1 << 4;
/// HELLO feature bit 6: the pair exchange (protocol §7.1.1, §19): on
/// two ranks, barrier and the star's allreduce exchange instead of
/// meeting at rank 0. No new frame.
pub const FEATURE_PAIR_EXCHANGE: u64 = 1 << 6;
/// HELLO feature bit 7: the owner-fold allreduce (protocol §7.1.1, §20):
/// block b of every rank's array goes to rank b, which folds it and sends
/// the result block to every rank. The frames of §14.2; needs bit 1.
pub const FEATURE_OWNER_FOLD: u64 = 1 << 7;
/// HELLO feature bit 8: the binomial bcast (protocol §7.1.1, §21): the
/// first frame of a bcast goes down a binomial tree instead of from the
/// root to every rank. No new frame.
pub const FEATURE_BINOMIAL_BCAST: u64 = 1 << 8;
/// HELLO feature bit 9: the pair exchange up to 1 MiB (protocol §7.1.1,
/// §22): with bits 1 and 6, an allreduce on two ranks of less than 1 MiB
/// runs the pair exchange also from T on. No new frame.
pub const FEATURE_LARGE_PAIR_EXCHANGE: u64 = 1 << 9;
/// The DATA header of a job with feature bit 3 (protocol §16.2).
pub const DATA_HEADER_LEN: usize = 24;
/// The data bytes of every frame of a message but its last, with feature
/// bit 3: the largest payload less the DATA header (protocol §16.2).
pub const MAX_MESSAGE_FRAME_DATA: usize = MAX_PAYLOAD as usize - DATA_HEADER_LEN;
/// The feature bits this implementation announces in its HELLO by
/// default: the extensions it implements (bit 5 only where the rank has a
/// control channel, protocol §18.1). An extension is used only when every
/// rank of the job announced it (protocol §7.1.1).
pub const FEATURES_IMPLEMENTED: u64 = FEATURE_V1_CORE
    | FEATURE_PIPELINED
    | FEATURE_COMMUNICATORS
    | FEATURE_P2P_COMMUNICATORS
    | FEATURE_ELEMENT_TYPES
    | crate::recovery::FEATURE_MEMBERSHIP
    | FEATURE_PAIR_EXCHANGE
    | FEATURE_OWNER_FOLD
    | FEATURE_BINOMIAL_BCAST
    | FEATURE_LARGE_PAIR_EXCHANGE;
/// Heartbeat interval: a connection that sent nothing for this long sends one.
pub const HEARTBEAT_INTERVAL_MS: u64 = 1000;
/// Default silence limit before a peer counts as lost.
pub const DEFAULT_SILENCE_MS: u64 = 5000;
/// Interval between connect attempts.
pub const CONNECT_RETRY_MS: u64 = 100;
/// Connection set-up window.
pub const SETUP_WINDOW_MS: u64 = 30_000;
/// Signature context of join tokens.
pub const CONTEXT_JOIN: &[u8] = b"SPERLI-JOIN-1";
/// Signature context of COMMIT files.
pub const CONTEXT_COMMIT: &[u8] = b"SPERLI-COMMIT-1";
/// Rank file header length.
pub const RANK_FILE_HEADER_LEN: usize = 80;
/// The fixed part of a COMMIT file before the per-rank hashes.
pub const COMMIT_FIXED_LEN: usize = 40;

/// Length of a COMMIT file for `size` ranks: 40 + 32·size + 2 + 2484.
pub const fn commit_file_len(size: u32) -> usize {
    COMMIT_FIXED_LEN + 32 * size as usize + 2 + SIGNATURE_LEN
}
