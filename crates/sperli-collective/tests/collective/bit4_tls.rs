//! HELLO feature bit 4 (protocol §17) between real ranks over TLS 1.3 on
//! 127.0.0.0/8: every new element type with each of its reductions
//! through every folding call at 3 and 5 ranks, star and pipelined,
//! against `bit4_ref`'s serial left fold; and a job where one rank does
//! not announce bit 4, which refuses the new codes with H1618 and runs v1
//! calls as before.

use sperli_collective::{Comm, Complex128, Complex64, Endpoint, ValueIndex};
use sperli_transport::Settings;
use sperli_wire::element::Reduction;
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_ELEMENT_TYPES};

use crate::bit4_fake::{assert_refused, every_call, lens, refused_calls, WITH_BIT4};
use crate::bit4_ref::Ref4;
use crate::tls::{run_job_with, settings, tls_test_within};

fn announcing(features: u64) -> Settings {
    Settings {
        features,
        ..settings()
    }
}

fn both_lens<T: Ref4>(c: &Comm<Endpoint>, salt: u64) {
    for (i, len) in lens::<T>(c.size()).into_iter().enumerate() {
        every_call::<T, _>(c, salt + i as u64, len);
    }
}

fn tls_all_types(n: u32) {
    tls_test_within(std::time::Duration::from_secs(300), move || {
        run_job_with(
            n,
            |_| announcing(WITH_BIT4),
            |ep| ep,
            |c| {
                assert_ne!(c.features() & FEATURE_ELEMENT_TYPES, 0);
                both_lens::<bool>(&c, 1);
                both_lens::<i8>(&c, 2);
                both_lens::<i16>(&c, 3);
                both_lens::<u16>(&c, 4);
                both_lens::<Complex64>(&c, 5);
                both_lens::<Complex128>(&c, 6);
                both_lens::<ValueIndex<f32>>(&c, 7);
                both_lens::<ValueIndex<f64>>(&c, 8);
                both_lens::<ValueIndex<i64>>(&c, 9);
                both_lens::<ValueIndex<i32>>(&c, 10);
                both_lens::<ValueIndex<i16>>(&c, 11);
            },
        );
    });
}

#[test]
fn tls_every_new_type_and_minloc_maxloc_at_3_ranks() {
    tls_all_types(3);
}

#[test]
fn tls_every_new_type_and_minloc_maxloc_at_5_ranks() {
    tls_all_types(5);
}

#[test]
fn tls_one_rank_without_bit_4_refuses_the_new_codes_and_runs_as_before() {
    tls_test_within(std::time::Duration::from_secs(120), || {
        let n = 3;
        let out = run_job_with(
            n,
            |r| {
                announcing(if r == 2 {
                    FEATURES_IMPLEMENTED & !FEATURE_ELEMENT_TYPES
                } else {
                    WITH_BIT4
                })
            },
            |ep| ep,
            |c| {
                assert_eq!(c.features() & FEATURE_ELEMENT_TYPES, 0);
                assert_refused(&refused_calls(&c));
                let me = u64::from(c.rank());
                c.allreduce(&[me, 1], Reduction::Sum).unwrap()
            },
        );
        assert!(out.iter().all(|v| v == &[3, 3]));
    });
}
