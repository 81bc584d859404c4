//! The entries of the vectors file: inputs built with the sperli-wire
//! encoders; every derived line comes from `verify::derive`.

use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::bye::Bye;
use sperli_wire::ckpt_ack::CkptAck;
use sperli_wire::ckpt_begin::CkptBegin;
use sperli_wire::ckpt_data::{CkptData, CkptDataKind};
use sperli_wire::codec::Codec;
use sperli_wire::collective::{Collective, CollectiveHeader, Operation, Phase};
use sperli_wire::commit_file::{assemble, decode_file, signed_message};
use sperli_wire::data::Data;
use sperli_wire::frame::{encode_frame, encode_frame_bytes};
use sperli_wire::header::{FrameHeader, RawHeader};
use sperli_wire::heartbeat::Heartbeat;
use sperli_wire::hello::Hello;
use sperli_wire::hex;
use sperli_wire::job_description::{HostEntry, JobDescription};
use sperli_wire::join_token::{JoinToken, JoinTokenMessage};
use sperli_wire::limits::{commit_file_len, PUBLIC_KEY_LEN, SIGNATURE_LEN};
use sperli_wire::payload::Payload;
use sperli_wire::rank_file::{build_rank_file, whole_file_hash};
use sperli_wire::resume::{Resume, ResumeStatus};
use sperli_wire::{ElementType, FrameType, JobId, Reduction, Sha256Digest};

use super::verify::derive;
use super::Entry;

mod descriptions;
mod files;
mod frames;
mod reduces;

use descriptions::{descriptions, tokens};
use files::files;
use frames::frames;
use reduces::reduces;

const JOB: JobId = JobId([
    0x5b, 0x1e, 0x4c, 0x0d, 0x2a, 0x77, 0x40, 0x19, 0x8e, 0x3f, 0x61, 0xd2, 0x09, 0xa4, 0xc3, 0x5e,
]);
const OTHER_JOB: JobId = JobId([0x11; 16]);
const SIZE: u32 = 3;
const INC: u32 = 2;
const EPOCH: u64 = 4;
const SIG: [u8; SIGNATURE_LEN] = [0xaa; SIGNATURE_LEN];
const EXPIRES: u64 = 1_893_456_000_000; // 2030-01-01T00:00:00Z

fn receiver(own: u32, peer: u32) -> String {
    format!("job={JOB} rank={own} peer={peer} incarnation={INC} size={SIZE}")
}

fn token_bytes(rank: u32, host: &str) -> Vec<u8> {
    let m = JoinTokenMessage {
        job_id: JOB,
        rank,
        size: SIZE,
        incarnation: INC,
        expires_at_ms: EXPIRES,
        host,
    };
    JoinToken::assemble(&m.to_vec(), &SIG)
}

fn state(rank: u32) -> Vec<u8> {
    format!("state of rank {rank} at epoch {EPOCH}").into_bytes()
}

fn rank_file(rank: u32) -> Vec<u8> {
    build_rank_file(JOB, EPOCH, rank, SIZE, &state(rank))
}

fn commit_bytes(job: JobId, epoch: u64, size: u32) -> Vec<u8> {
    let hashes: Vec<Sha256Digest> = (0..size)
        .map(|r| whole_file_hash(&build_rank_file(job, epoch, r, size, &state(r))))
        .collect();
    assemble(&signed_message(job, epoch, &hashes), &SIG)
}

fn hdr(t: FrameType, from: u32, to: u32) -> FrameHeader {
    FrameHeader::new(t, JOB, from, to, INC)
}

/// A frame entry; derived lines filled in, and for accepted frames the
/// decoded payload must re-encode to the same bytes.
fn frame(name: &str, own: u32, peer: u32, bytes: Vec<u8>) -> Entry {
    let e = Entry::new(name, "frame")
        .with("receiver", receiver(own, peer))
        .with("bytes", hex::encode(&bytes));
    derive(e).unwrap_or_else(|why| panic!("{name}: {why}"))
}

fn positive(name: &str, own: u32, peer: u32, h: FrameHeader, p: Payload<'_>) -> Entry {
    let bytes = encode_frame(h, &p);
    let e = frame(name, own, peer, bytes);
    assert_eq!(e.get("verdict"), Some("accept"), "{name}");
    e
}

fn raw_header(name: &str, own: u32, peer: u32, f: impl FnOnce(&mut RawHeader)) -> Entry {
    let mut r = hdr(FrameType::Data, peer, own).with_tag(7).to_raw();
    f(&mut r);
    frame(name, own, peer, r.to_bytes().to_vec())
}

/// Every entry, in file order.
pub fn all() -> Vec<Entry> {
    let mut v = frames();
    v.extend(files());
    v.extend(descriptions());
    v.extend(tokens());
    v.extend(reduces());
    v.extend(super::pipelined::entries());
    v.extend(super::communicators::entries());
    v.extend(super::p2p::entries());
    v.extend(super::element_types::entries());
    v.extend(super::membership::entries());
    v.extend(super::pair::entries());
    v.extend(super::owner_fold::entries());
    v.extend(super::binomial_tree::entries());
    v
}
