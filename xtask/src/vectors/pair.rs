//! The vectors of HELLO feature bit 6, the pair exchange (protocol §19.4),
//! and of bit 9, the pair exchange up to the frame limit (§22.2):
//! `collective-stream` entries of a two-rank allreduce whose receiver
//! names its rank, so that what is due (a phase-0 contribution at both
//! ranks with bit 6; the phase-1 result at rank 1 without; with bit 9 the
//! contribution also from T up to 1 MiB) is derived from the
//! receiver's features and the call's length, not only stated.

use sperli_wire::collective::{Operation, Phase};
use sperli_wire::limits::{
    FEATURE_LARGE_PAIR_EXCHANGE, FEATURE_PAIR_EXCHANGE, FEATURE_PIPELINED, FEATURE_V1_CORE,
};
use sperli_wire::pair::PAIR_EXCHANGE_BELOW;
use sperli_wire::pipeline::PIPELINE_MIN_BYTES;

use super::pipelined::{chunk, header, judged, open, star};
use super::Entry;

const SEQ: u64 = 7;
/// Bits 0, 1 and 6.
const WITH: u64 = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_PAIR_EXCHANGE;
/// Bits 0 and 1.
const WITHOUT: u64 = FEATURE_V1_CORE | FEATURE_PIPELINED;

/// Bits 0, 1, 6 and 9.
const LARGE: u64 = WITH | FEATURE_LARGE_PAIR_EXCHANGE;

/// One entry: rank `rank` of two, in an allreduce of 8 bytes of f64 sum,
/// takes `frames` from the other rank; `due` its phase.
fn take(
    name: &str,
    rank: u32,
    features: u64,
    due: Phase,
    frames: &[Vec<u8>],
    verdict: &str,
) -> Entry {
    take_len(name, rank, features, 8, due, frames, verdict)
}

/// As [`take`], in an allreduce of `len` bytes.
fn take_len(
    name: &str,
    rank: u32,
    features: u64,
    len: u64,
    due: Phase,
    frames: &[Vec<u8>],
    verdict: &str,
) -> Entry {
    let e = Entry::new(name, "collective-stream")
        .with(
            "receiver",
            format!("size=2 features={features} rank={rank}"),
        )
        .with(
            "call",
            format!("operation=4 element_type=6 reduction=1 sequence={SEQ} length={len}"),
        )
        .with("due", format!("phase={} root=0", due as u8));
    judged(e, frames, verdict)
}

/// The bit-9 entries (protocol §22.2): at T the exchange is due at both
/// ranks, from 1 MiB the chain.
fn large() -> Vec<Entry> {
    let ar = |ph| header(Operation::Allreduce, ph, 0);
    let t = PIPELINE_MIN_BYTES;
    let past = PAIR_EXCHANGE_BELOW;
    vec![
        take_len(
            "pair-bit-9-rank-1-partial-chunk-at-t",
            1,
            LARGE,
            t,
            Phase::ToRoot,
            &[chunk(ar(Phase::Partial), 0, t, 8)],
            "reject H1617 phase",
        ),
        take_len(
            "pair-bit-9-rank-0-open-at-t",
            0,
            LARGE,
            t,
            Phase::ToRoot,
            &[open(ar(Phase::Open), t, 1)],
            "reject H1618 shape",
        ),
        take_len(
            "pair-bit-9-rank-1-takes-the-chain-from-1-mib",
            1,
            LARGE,
            past,
            Phase::Partial,
            &[chunk(ar(Phase::Partial), 0, past, 8)],
            "accept",
        ),
    ]
}

/// Every bit-6 entry.
pub fn entries() -> Vec<Entry> {
    let ar = |ph| header(Operation::Allreduce, ph, 0);
    let contribution = star(ar(Phase::ToRoot), 8);
    let result = star(ar(Phase::FromRoot), 8);
    let partial = chunk(ar(Phase::Partial), 0, 8, 8);
    let (to, from) = (Phase::ToRoot, Phase::FromRoot);
    vec![
        take(
            "pair-rank-1-takes-the-contribution",
            1,
            WITH,
            to,
            std::slice::from_ref(&contribution),
            "accept",
        ),
        take(
            "pair-rank-0-takes-the-contribution",
            0,
            WITH,
            to,
            std::slice::from_ref(&contribution),
            "accept",
        ),
        take(
            "pair-rank-1-v1-result-frame",
            1,
            WITH,
            to,
            std::slice::from_ref(&result),
            "reject H1617 phase",
        ),
        take(
            "pair-rank-1-partial-chunk",
            1,
            WITH,
            to,
            &[partial],
            "reject H1617 phase",
        ),
        take(
            "pair-without-bit-6-rank-1-takes-the-result",
            1,
            WITHOUT,
            from,
            &[result],
            "accept",
        ),
        take(
            "pair-without-bit-6-rank-1-contribution-frame",
            1,
            WITHOUT,
            from,
            &[contribution],
            "reject H1617 phase",
        ),
    ]
    .into_iter()
    .chain(large())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::super::verify::derive;
    use super::*;

    #[test]
    fn a_due_phase_that_the_receiver_does_not_take_is_refused() {
        let e = Entry::new("x", "collective-stream")
            .with("receiver", format!("size=2 features={WITHOUT} rank=1"))
            .with(
                "call",
                "operation=4 element_type=6 reduction=1 sequence=7 length=8",
            )
            .with("due", "phase=0 root=0")
            .with("frames", "");
        assert!(derive(e).unwrap_err().starts_with("due:"));
    }

    #[test]
    fn with_bit_9_the_exchange_is_due_from_t_up_to_1_mib() {
        let entry = |len: u64, phase: u8| {
            Entry::new("x", "collective-stream")
                .with("receiver", format!("size=2 features={LARGE} rank=1"))
                .with(
                    "call",
                    format!("operation=4 element_type=6 reduction=1 sequence=7 length={len}"),
                )
                .with("due", format!("phase={phase} root=0"))
                .with("frames", "")
        };
        let last = PAIR_EXCHANGE_BELOW - 8;
        assert!(derive(entry(last, 3)).unwrap_err().starts_with("due:"));
        assert!(derive(entry(PIPELINE_MIN_BYTES, 1))
            .unwrap_err()
            .starts_with("due:"));
        assert!(derive(entry(last, 0)).is_ok());
        assert!(derive(entry(PAIR_EXCHANGE_BELOW, 3)).is_ok());
    }
}
