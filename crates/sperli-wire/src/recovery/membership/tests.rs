use super::*;
use crate::error::HCode;
use proptest::prelude::*;

/// A replace record of epoch 2 for a job of 4: rank 2 replaced.
pub(crate) fn replace_sample() -> MembershipRecord {
    MembershipRecord {
        mode: Mode::Replace,
        agreed: true,
        job_id: JobId([0x11; 16]),
        start_incarnation: 1,
        epoch: 2,
        size: 4,
        rollback: 3,
        incarnations: vec![1, 1, 2, 1],
        changes: vec![Change {
            rank: 2,
            cert_sha256: Sha256Digest([0x22; 32]),
            endpoint: Some((7002, "127.0.0.3".into())),
        }],
        signature: vec![0xaa; SIGNATURE_LEN],
    }
}

/// A shrink record of epoch 2 for a job of 4: ranks 1 and 3 removed.
pub(crate) fn shrink_sample() -> MembershipRecord {
    MembershipRecord {
        mode: Mode::Shrink,
        agreed: false,
        job_id: JobId([0x11; 16]),
        start_incarnation: 1,
        epoch: 2,
        size: 4,
        rollback: NO_ROLLBACK,
        incarnations: vec![1, 0, 1, 0],
        changes: vec![
            Change {
                rank: 1,
                cert_sha256: Sha256Digest([0; 32]),
                endpoint: None,
            },
            Change {
                rank: 3,
                cert_sha256: Sha256Digest([0; 32]),
                endpoint: None,
            },
        ],
        signature: vec![0xaa; SIGNATURE_LEN],
    }
}

fn view() -> MembershipView {
    MembershipView {
        job_id: JobId([0x11; 16]),
        size: 4,
        start_incarnation: 1,
        epoch: 1,
        incarnations: vec![1; 4],
        current_record: vec![],
    }
}

fn check(b: &[u8]) -> &'static str {
    MembershipRecord::decode(b).unwrap_err().check_name()
}

#[test]
fn round_trips_and_lengths() {
    for r in [replace_sample(), shrink_sample()] {
        let b = r.encode();
        assert_eq!(b.len(), r.signed_len() + 2 + SIGNATURE_LEN);
        assert_eq!(&b[..4], b"SPMB");
        assert_eq!(MembershipRecord::decode(&b), Ok(r));
    }
    assert_eq!(replace_sample().signed_len(), FIXED_LEN + 16 + 39 + 9);
}

#[test]
fn every_proper_prefix_fails() {
    for r in [replace_sample(), shrink_sample()] {
        let b = r.encode();
        for n in 0..b.len() {
            assert_eq!(check(&b[..n]), "truncated", "prefix {n}");
        }
    }
}

#[test]
fn decode_checks_in_order() {
    let b = replace_sample().encode();
    let with = |off: usize, v: &[u8]| {
        let mut c = b.clone();
        c[off..off + v.len()].copy_from_slice(v);
        c
    };
    assert_eq!(check(&with(0, b"SPMX")), "magic");
    assert_eq!(check(&with(4, &[2, 0])), "version");
    assert_eq!(check(&with(6, &[3])), "mode");
    assert_eq!(check(&with(7, &[2])), "agreed");
    assert_eq!(check(&with(24, &[0, 0, 0, 0])), "epoch");
    assert_eq!(check(&with(28, &[1, 0, 0, 0])), "epoch");
    assert_eq!(check(&with(32, &[0, 0, 0, 0])), "size");
    assert_eq!(check(&with(36, &[0, 0, 0, 0])), "changed");
    assert_eq!(check(&with(36, &[4, 0, 0, 0])), "changed");
    assert_eq!(check(&with(40, &[0xff; 8])), "rollback");
    assert_eq!(check(&with(64, &[4, 0, 0, 0])), "entry");
    assert_eq!(check(&with(56, &[0, 0, 0, 0])), "entry");
    let sig = replace_sample().signed_len();
    assert_eq!(check(&with(sig, &[0, 0])), "sig_len");
    let mut t = b.clone();
    t.push(0);
    assert_eq!(check(&t), "trailing");
    let mut s = shrink_sample();
    s.rollback = 0;
    assert_eq!(check(&s.encode()), "rollback");
    let mut s = shrink_sample();
    s.incarnations = vec![0; 4];
    s.changes = vec![Change {
        rank: 0,
        cert_sha256: Sha256Digest([0; 32]),
        endpoint: None,
    }];
    assert_eq!(check(&s.encode()), "members");
    let mut s = replace_sample();
    s.changes[0].endpoint = Some((7002, "Bad_Host".into()));
    assert_eq!(check(&s.encode()), "entry");
    assert_eq!(
        MembershipRecord::decode(&t).unwrap_err().h_code(),
        HCode::H1610
    );
}

#[test]
fn state_checks() {
    let r = replace_sample();
    let b = r.encode();
    let v = view();
    assert_eq!(r.precheck(&b, &v), Ok(Precheck::Verify));
    assert_eq!(r.check_history(&v, (0, 1), |_| false), Ok(()));
    assert_eq!(
        r.check_history(&v, (2, 1), |_| false),
        Err(RecoveryError::Fenced { epoch: 2 })
    );
    assert_eq!(
        r.check_history(&v, (0, 1), |_| true),
        Err(RecoveryError::HostRefused { rank: 2 })
    );
    let mut other = v.clone();
    other.size = 5;
    assert_eq!(r.precheck(&b, &other).unwrap_err().check_name(), "job");
    let mut held = v.clone();
    held.epoch = 2;
    held.current_record = b.clone();
    assert_eq!(r.precheck(&b, &held), Ok(Precheck::Discard));
    held.current_record = shrink_sample().encode();
    assert_eq!(
        r.precheck(&b, &held),
        Err(RecoveryError::Equivocation { epoch: 2 })
    );
    held.epoch = 3;
    assert_eq!(r.precheck(&b, &held), Ok(Precheck::Discard));
    let mut bad = r.clone();
    bad.incarnations[2] = 1;
    assert_eq!(
        bad.check_history(&v, (0, 1), |_| false)
            .unwrap_err()
            .check_name(),
        "history"
    );
    let mut bad = r.clone();
    bad.incarnations[0] = 5;
    assert_eq!(
        bad.check_history(&v, (1, 1), |_| false)
            .unwrap_err()
            .check_name(),
        "history"
    );
    let s = shrink_sample();
    assert_eq!(s.check_history(&v, (0, 1), |_| false), Ok(()));
    assert_eq!(
        s.check_history(&v, (1, 1), |_| false),
        Err(RecoveryError::Fenced { epoch: 2 })
    );
}

proptest! {
    #[test]
    fn replace_round_trips(size in 2u32..=64, agreed: bool, epoch in 2u32.., rollback in 0u64..u64::MAX,
                           picks in proptest::collection::btree_set(0u32..64, 1..8), port in 1u16..) {
        let ranks: Vec<u32> = picks.into_iter().filter(|r| *r < size).collect();
        prop_assume!(!ranks.is_empty() && ranks.len() < size as usize);
        let mut incarnations = vec![3u32; size as usize];
        for r in &ranks { incarnations[*r as usize] = 4; }
        let changes = ranks.iter().map(|r| Change {
            rank: *r, cert_sha256: Sha256Digest([*r as u8; 32]), endpoint: Some((port, format!("h{r}.example"))),
        }).collect();
        let rec = MembershipRecord { mode: Mode::Replace, agreed, job_id: JobId([5; 16]), start_incarnation: 3,
            epoch, size, rollback, incarnations, changes, signature: vec![0xaa; SIGNATURE_LEN] };
        prop_assert_eq!(MembershipRecord::decode(&rec.encode()), Ok(rec));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = MembershipRecord::decode(&bytes);
    }
}
