//! `communicator::split` (feature bit 2, protocol §15.3).
//!
//! Input: one byte for the parent's size (1..=64, from the byte mod 64 +
//! 1), one for this rank (mod size), then a split's exchange. A split that
//! succeeds must give a rank that is a member exactly when it has a color,
//! at its own place, in a group ordered by (key, parent rank), and every
//! member must compute the same group; the exchange must re-encode to the
//! same bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::codec::Reader;
use sperli_wire::communicator::{split, SplitRecord};

fuzz_target!(|data: &[u8]| {
    let Some((&[n, me], exchange)) = data.split_first_chunk::<2>() else {
        return;
    };
    let size = u32::from(n) % 64 + 1;
    let me = u32::from(me) % size;
    let s = match split(exchange, size, me) {
        Ok(s) => s,
        Err(e) => {
            common::touch(&format!("{e:?}"));
            return;
        }
    };
    let mut r = Reader::new(exchange);
    let recs: Vec<SplitRecord> = (0..size)
        .map(|p| SplitRecord::decode(&mut r, p).expect("split decoded it"))
        .collect();
    let mut again = Vec::new();
    for x in &recs {
        x.encode(&mut again);
    }
    common::assert_same("split exchange", exchange, &again);
    assert!(s.id >= 1);
    assert!(recs.iter().all(|x| x.highest < s.id), "the id is above every highest");
    match (&s.members, s.rank) {
        (Some(m), Some(rank)) => {
            assert_eq!(m[rank as usize], me);
            let color = recs[me as usize].color;
            assert!(color.is_some());
            assert_eq!(m.len(), recs.iter().filter(|x| x.color == color).count());
            for w in m.windows(2) {
                let (a, b) = (&recs[w[0] as usize], &recs[w[1] as usize]);
                assert!((a.key, w[0]) < (b.key, w[1]), "ordered by key, then rank");
            }
            for &p in m {
                assert_eq!(split(exchange, size, p).unwrap().members.as_ref(), Some(m));
            }
        }
        (None, None) => assert!(recs[me as usize].color.is_none()),
        _ => panic!("a group without a rank in it"),
    }
});
