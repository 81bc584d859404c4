//! [`BcastState::bcast_state`]: a struct of parameters from one rank to
//! every rank in one call.
//!
//! It lives here and not in sperli-collective because [`Checkpointable`]
//! is defined here and sperli-ckpt sits downstream of sperli-collective
//! (the crates' arrows go one way): an extension trait on
//! [`Comm`] that any `use sperli_ckpt::BcastState;` brings in.
//!
//! On the wire it is a [`Comm::bcast_counted`] of the state bytes of
//! protocol §9.2 (`u32` format version, then the encoding): with feature
//! bit 1 one bcast call, in a v1 job one bcast carrying the length, then
//! one per 16777200 bytes (protocol §8.9). No new frame.

use sperli_collective::{Comm, Peers};
use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::Error;

use crate::state::{decode_state_raw, encode_state, Checkpointable};

/// What a failed decoding names in [`Error::UnexpectedFile`].
pub const BCAST_STATE: &str = "broadcast state";

/// `bcast_state` on a [`Comm`]: see [`BcastState::bcast_state`].
pub trait BcastState {
    /// Broadcasts `state` from `root`: at the root it is sent and left as
    /// it is, at every other rank it is replaced by the root's value.
    /// Every rank must call it with the same `root` and type `T`.
    ///
    /// Errors: those of [`Comm::bcast_counted`] (H1618 on every rank for
    /// `root >= size`; H1612, H1613 when the job ends). A receiver that
    /// cannot decode what came (another [`Checkpointable::FORMAT_VERSION`],
    /// another type at the root: truncated, invalid or left-over bytes)
    /// returns H1619 ([`Error::UnexpectedFile`] naming [`BCAST_STATE`])
    /// and ends the job with ABORT reason 3, code 1619 (the others get
    /// H1612 on their next call): only it can tell.
    ///
    /// ```
    /// use sperli_ckpt::{checkpointable, BcastState};
    /// use sperli_collective::fake;
    ///
    /// #[derive(Debug, Clone, PartialEq, Default)]
    /// struct Params {
    ///     steps: u64,
    ///     tol: f64,
    ///     name: String,
    /// }
    /// checkpointable!(Params { steps, tol, name });
    ///
    /// let got = fake::run(3, |c| {
    ///     let mut p = if c.rank() == 0 {
    ///         Params { steps: 500, tol: 1e-9, name: "heat".into() }
    ///     } else {
    ///         Params::default()
    ///     };
    ///     c.bcast_state(0, &mut p).unwrap();
    ///     p
    /// });
    /// assert!(got.iter().all(|p| p.steps == 500 && p.name == "heat"));
    /// ```
    fn bcast_state<T: Checkpointable>(&self, root: u32, state: &mut T) -> Result<(), Error>;
}

impl<L: Peers> BcastState for Comm<L> {
    fn bcast_state<T: Checkpointable>(&self, root: u32, state: &mut T) -> Result<(), Error> {
        let mut bytes = if self.rank() == root {
            encode_state(state)
        } else {
            Vec::new()
        };
        self.bcast_counted(root, &mut bytes)?;
        if self.rank() == root {
            return Ok(());
        }
        match decode_state_raw::<T>(&bytes) {
            Ok(v) => {
                *state = v;
                Ok(())
            }
            Err(error) => {
                let e = Error::UnexpectedFile {
                    what: BCAST_STATE,
                    error,
                };
                let text = e.to_string();
                self.link().abort(
                    AbortReason::CollectiveMismatch,
                    e.h_code().map_or(0, |c| c.number()),
                    Abort::truncate_message(&text),
                );
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sperli_collective::fake::{self, FakePeers};
    use sperli_wire::error::DecodeError;
    use sperli_wire::limits::FEATURE_V1_CORE;

    use super::*;
    use crate::checkpointable;

    #[derive(Debug, Clone, PartialEq, Default)]
    struct Params {
        steps: u64,
        tol: f64,
        grid: Vec<u32>,
        name: String,
    }
    checkpointable!(Params {
        steps,
        tol,
        grid,
        name
    });

    #[derive(Debug, Clone, PartialEq, Default)]
    struct Params2 {
        steps: u64,
    }
    checkpointable!(Params2 { steps } version 2);

    fn root_params(n: usize) -> Params {
        Params {
            steps: 77,
            tol: -0.0,
            grid: (0..n as u32).collect(),
            name: "jacobi".into(),
        }
    }

    #[test]
    fn every_rank_gets_the_roots_state_at_1_2_3_ranks_bit_1_and_v1() {
        for size in [1u32, 2, 3] {
            for v1 in [false, true] {
                let links = if v1 {
                    FakePeers::job_with_features(&vec![FEATURE_V1_CORE; size as usize])
                } else {
                    FakePeers::job(size)
                };
                let root = size - 1;
                let got = fake::run_links(links, |c| {
                    let mut p = if c.rank() == root {
                        root_params(5_000_000)
                    } else {
                        Params::default()
                    };
                    c.bcast_state(root, &mut p).unwrap();
                    (p, c.sequence())
                });
                for (p, seq) in &got {
                    assert_eq!(p, &root_params(5_000_000));
                    // bit 1: one call; v1: the length, then 2 chunks of 20 MB.
                    let want = if v1 { 3 } else { 1 };
                    assert_eq!(*seq, want, "size {size} v1 {v1}");
                }
            }
        }
    }

    #[test]
    fn a_receiver_that_cannot_decode_gets_h1619_and_ends_the_job() {
        let out = fake::run(3, |c| {
            let first = if c.rank() == 2 {
                c.bcast_state(0, &mut Params2::default())
            } else {
                let mut p = root_params(3);
                c.bcast_state(0, &mut p)
            };
            let later = c.barrier();
            (first, later)
        });
        match &out[2].0 {
            Err(Error::UnexpectedFile {
                what: BCAST_STATE,
                error:
                    DecodeError::Mismatch {
                        field: "state format version",
                        expected: 2,
                        got: 1,
                    },
            }) => {}
            other => panic!("{other:?}"),
        }
        for (r, (first, later)) in out.iter().enumerate().take(2) {
            // Rank 2's ABORT may come in before a slow rank has taken its
            // own part of the broadcast: then that call fails with it
            // (protocol §7.5), and so does the barrier.
            let later = match first {
                Ok(()) => later,
                Err(_) => first,
            };
            match later {
                Err(Error::AbortedByPeer {
                    from, reason, code, ..
                }) => {
                    assert_eq!((*from, *reason, *code), (2, 3, 1619));
                }
                // Rank 1 may see rank 2's connection close first.
                Err(Error::PeerLost { .. }) if r == 1 => {}
                other => panic!("rank {r}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_root_out_of_range_is_h1618_on_every_rank() {
        let out = fake::run(2, |c| {
            let e = c.bcast_state(2, &mut Params::default()).unwrap_err();
            (e.h_code().map(|h| h.number()), c.barrier().is_ok())
        });
        assert_eq!(out, vec![(Some(1618), true); 2]);
    }
}
