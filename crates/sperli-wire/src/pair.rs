//! The pair exchange of HELLO feature bit 6 (protocol §19): which v1
//! frame a rank of a two-rank collective takes, and with bit 9 (§22) up to
//! which length an allreduce exchanges. No new frame.

/// Protocol §22.1: with bit 9 an allreduce on two ranks exchanges from T
/// up to (not including) this many bytes.
pub const PAIR_EXCHANGE_BELOW: u64 = 1_048_576;

use crate::collective::Phase;
use crate::limits::{FEATURE_LARGE_PAIR_EXCHANGE, FEATURE_PAIR_EXCHANGE, FEATURE_PIPELINED};
use crate::owner_fold::runs_owner_fold;
use crate::pipeline::PIPELINE_MIN_BYTES;

/// Whether calls on `size` ranks of a job that negotiated `features` run
/// the pair exchange where protocol §19.1 says so: bit 6, and two ranks.
///
/// ```
/// use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_V1_CORE};
/// use sperli_wire::pair::pair_exchange;
/// assert!(pair_exchange(2, FEATURES_IMPLEMENTED));
/// assert!(!pair_exchange(3, FEATURES_IMPLEMENTED));
/// assert!(!pair_exchange(2, FEATURE_V1_CORE));
/// ```
pub fn pair_exchange(size: u32, features: u64) -> bool {
    size == 2 && features & FEATURE_PAIR_EXCHANGE != 0
}

/// Protocol §22.1: whether an allreduce of `len` bytes per rank on `size`
/// ranks of a job that negotiated `features` runs the pair exchange of
/// §19.3 where §14.5 would run the chain: bits 1, 6 and 9, two ranks,
/// T ≤ `len` < 1 MiB ([`PAIR_EXCHANGE_BELOW`]), and not the owner fold of
/// §20 (bit 7). The caller excludes reduction 13 (user-defined), which
/// always runs the star.
///
/// ```
/// use sperli_wire::limits::{
///     FEATURE_LARGE_PAIR_EXCHANGE, FEATURE_PAIR_EXCHANGE, FEATURE_PIPELINED, FEATURE_V1_CORE,
/// };
/// use sperli_wire::pair::exchange_replaces_chain;
/// let f = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_PAIR_EXCHANGE | FEATURE_LARGE_PAIR_EXCHANGE;
/// assert!(exchange_replaces_chain(f, 2, 262_144));
/// assert!(exchange_replaces_chain(f, 2, 1_048_568));
/// assert!(!exchange_replaces_chain(f, 2, 1_048_576)); // from 1 MiB: the chain
/// assert!(!exchange_replaces_chain(f, 2, 1024)); // below T: no chain to replace
/// assert!(!exchange_replaces_chain(f, 3, 262_144));
/// assert!(!exchange_replaces_chain(f & !FEATURE_LARGE_PAIR_EXCHANGE, 2, 262_144));
/// ```
pub fn exchange_replaces_chain(features: u64, size: u32, len: u64) -> bool {
    let bits = FEATURE_PIPELINED | FEATURE_PAIR_EXCHANGE | FEATURE_LARGE_PAIR_EXCHANGE;
    features & bits == bits
        && size == 2
        && (PIPELINE_MIN_BYTES..PAIR_EXCHANGE_BELOW).contains(&len)
        && !runs_owner_fold(features, size, len)
}

/// The phase rank `rank` takes from the other rank in an allreduce of the
/// v1 star (protocol §8.2: the root, rank 0, takes phase 0, every other
/// rank the phase-1 result) or, on two ranks with bit 6, of the pair
/// exchange (§19.3: both take the other's phase-0 contribution).
///
/// ```
/// use sperli_wire::collective::Phase;
/// use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_V1_CORE};
/// use sperli_wire::pair::allreduce_star_due;
/// assert_eq!(allreduce_star_due(1, 2, FEATURES_IMPLEMENTED), Phase::ToRoot);
/// assert_eq!(allreduce_star_due(1, 2, FEATURE_V1_CORE), Phase::FromRoot);
/// assert_eq!(allreduce_star_due(0, 2, FEATURE_V1_CORE), Phase::ToRoot);
/// ```
pub fn allreduce_star_due(rank: u32, size: u32, features: u64) -> Phase {
    if rank == 0 || pair_exchange(size, features) {
        Phase::ToRoot
    } else {
        Phase::FromRoot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{FEATURES_IMPLEMENTED, FEATURE_V1_CORE};

    #[test]
    fn only_two_ranks_with_bit_6_exchange() {
        for size in 1..=5 {
            for f in [FEATURE_V1_CORE, FEATURE_V1_CORE | FEATURE_PAIR_EXCHANGE] {
                assert_eq!(pair_exchange(size, f), size == 2 && f != FEATURE_V1_CORE);
            }
        }
        const { assert!(FEATURES_IMPLEMENTED & FEATURE_PAIR_EXCHANGE != 0) };
    }

    #[test]
    fn the_star_root_takes_phase_0_others_the_result_unless_they_exchange() {
        for size in 2..=4 {
            for r in 1..size {
                let due = if size == 2 {
                    Phase::ToRoot
                } else {
                    Phase::FromRoot
                };
                assert_eq!(allreduce_star_due(r, size, FEATURES_IMPLEMENTED), due);
                assert_eq!(
                    allreduce_star_due(r, size, FEATURE_V1_CORE),
                    Phase::FromRoot
                );
            }
            assert_eq!(allreduce_star_due(0, size, FEATURE_V1_CORE), Phase::ToRoot);
        }
    }
}
