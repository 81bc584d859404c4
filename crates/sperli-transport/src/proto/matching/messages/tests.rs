//! Messages of feature bit 3 without sockets (protocol §16).

use super::*;
use sperli_wire::limits::{FEATURE_V1_CORE, MAX_MESSAGE_FRAME_DATA};
use sperli_wire::match_notice::MatchNotice;

const BIT3: u64 = FEATURE_V1_CORE | FEATURE_COMMUNICATORS | FEATURE_P2P_COMMUNICATORS;

fn job(size: u32) -> Matching {
    let mut m = Matching::new(size, 0);
    m.set_features(BIT3).unwrap();
    m
}

fn frame(comm: u32, kind: DataKind, message: u64, total: u64, data: &[u8]) -> Vec<u8> {
    DataFrame {
        header: DataHeader {
            communicator: comm,
            kind,
            message,
            total,
        },
        data,
    }
    .to_vec()
}

fn msg(comm: u32, message: u64, data: &[u8]) -> Vec<u8> {
    frame(comm, DataKind::Standard, message, data.len() as u64, data)
}

fn got(m: &mut Matching, id: RecvId) -> (u32, u32, Vec<u8>) {
    let (st, b) = m.poll_recv(id).expect("complete").expect("a message");
    assert_eq!(st.len, b.len());
    (st.source, st.tag, b)
}

fn check(e: Error) -> &'static str {
    match e {
        Error::FrameRejected(FrameError::Message(m)) => m.check(),
        Error::FrameRejected(FrameError::Payload { error, .. }) => {
            sperli_wire::data_header::rule_name(&error)
        }
        e => panic!("not a rejected DATA frame: {e:?}"),
    }
}

#[test]
fn a_receive_on_a_dup_never_takes_a_message_of_its_parent() {
    let mut m = job(3);
    m.communicator_made(4, Some(Arc::from([0, 1, 2]))).unwrap();
    m.handle_data(1, 7, msg(0, 1, b"world")).unwrap();
    m.handle_data(1, 7, msg(4, 2, b"dup")).unwrap();
    // Any source, the same tag: each communicator gets its own.
    let on_dup = m.post_on(4, None, Some(7));
    assert_eq!(got(&mut m, on_dup), (1, 7, b"dup".to_vec()));
    let on_world = m.post_on(0, None, Some(7));
    assert_eq!(got(&mut m, on_world), (1, 7, b"world".to_vec()));
    // Posted first, in the other order of arrival.
    let world = m.post_on(0, Some(2), None);
    let dup = m.post_on(4, Some(2), None);
    m.handle_data(2, 1, msg(4, 1, b"d")).unwrap();
    assert!(
        m.poll_recv(world).is_none(),
        "the dup's message is not the world's"
    );
    m.handle_data(2, 1, msg(0, 2, b"w")).unwrap();
    assert_eq!(got(&mut m, dup), (2, 1, b"d".to_vec()));
    assert_eq!(got(&mut m, world), (2, 1, b"w".to_vec()));
}

#[test]
fn every_decode_rule_and_check_rejects() {
    let mut m = job(2);
    assert_eq!(
        check(m.handle_data(1, 0, vec![0; 23]).unwrap_err()),
        "data_header"
    );
    let mut m = job(2);
    assert_eq!(
        check(m.handle_data(1, 0, msg(0, 2, b"x")).unwrap_err()),
        "message_number"
    );
    let mut m = job(2);
    let short = frame(0, DataKind::Standard, 1, 5, b"abc");
    assert_eq!(check(m.handle_data(1, 0, short).unwrap_err()), "length");
    let mut m = job(2);
    m.communicator_made(3, None).unwrap();
    // Id 2 is at or below this rank's highest and not one of its own.
    assert_eq!(
        check(m.handle_data(1, 0, msg(2, 1, b"x")).unwrap_err()),
        "communicator"
    );
    let mut m = job(2);
    let notice = MatchNotice {
        communicator: 0,
        message: 1,
    }
    .to_vec();
    assert_eq!(check(m.handle_data(1, 0, notice).unwrap_err()), "notice");
}

#[test]
fn a_message_of_several_frames_is_matched_at_its_first_frame() {
    let mut m = job(2);
    let max = MAX_MESSAGE_FRAME_DATA;
    let total = (max + 10) as u64;
    let first = vec![1u8; max];
    m.handle_data(1, 5, frame(0, DataKind::Synchronous, 1, total, &first))
        .unwrap();
    // A probe reports the whole length from the first frame on.
    assert_eq!(m.probe_on(0, Some(1), Some(5)).unwrap().len, max + 10);
    let r = m.post_on(0, Some(1), Some(5));
    assert!(m.poll_recv(r).is_none(), "the rest is still coming");
    // Matched: the notice is due now, before the last frame.
    assert_eq!(
        m.take_notices(),
        [DueNotice {
            to: 1,
            comm: 0,
            tag: 5,
            message: 1
        }]
    );
    m.handle_data(1, 5, frame(0, DataKind::Synchronous, 1, total, &[2; 10]))
        .unwrap();
    let (_, _, b) = got(&mut m, r);
    assert_eq!(b.len(), max + 10);
    assert_eq!(&b[max..], &[2; 10]);
}

#[test]
fn a_cancelled_receive_drops_the_rest_of_its_message() {
    let mut m = job(2);
    let max = MAX_MESSAGE_FRAME_DATA;
    let total = (max + 1) as u64;
    let r = m.post_on(0, Some(1), None);
    m.handle_data(1, 0, frame(0, DataKind::Standard, 1, total, &vec![0; max]))
        .unwrap();
    m.cancel(r);
    m.handle_data(1, 0, frame(0, DataKind::Standard, 1, total, &[9]))
        .unwrap();
    m.handle_data(1, 0, msg(0, 2, b"next")).unwrap();
    let r = m.post_on(0, Some(1), None);
    assert_eq!(got(&mut m, r).2, b"next");
}

#[test]
fn a_message_for_a_communicator_being_made_waits_pending() {
    let mut m = job(3);
    m.handle_data(2, 3, msg(5, 1, b"early")).unwrap();
    m.handle_data(2, 3, msg(0, 2, b"world")).unwrap();
    assert!(m.probe_on(5, None, None).is_none(), "pending: never probed");
    m.communicator_made(5, Some(Arc::from([0, 2]))).unwrap();
    let r = m.post_on(5, None, Some(3));
    assert_eq!(got(&mut m, r), (2, 3, b"early".to_vec()));
    // A pending message whose communicator this rank did not join fails.
    m.handle_data(1, 0, msg(9, 1, b"x")).unwrap();
    let (from, e) = m.communicator_made(9, None).unwrap_err();
    assert_eq!((from, check(e)), (1, "communicator"));
}

#[test]
fn frames_kept_before_the_features_are_judged_with_them() {
    let mut m = Matching::new(2, 0);
    m.handle_data(1, 4, msg(0, 1, b"hi")).unwrap();
    m.set_features(BIT3).unwrap();
    let r = m.post_on(0, Some(1), Some(4));
    assert_eq!(got(&mut m, r).2, b"hi");
    let mut m = Matching::new(2, 0);
    m.handle_data(1, 4, b"v1 bytes".to_vec()).unwrap();
    let (from, e) = m.set_features(BIT3).unwrap_err();
    assert_eq!((from, check(e)), (1, "data_header"));
}

#[test]
fn a_synchronous_send_completes_with_its_notice() {
    let mut m = job(2);
    m.sent_synchronous(1, 1, 0, 8);
    assert!(m.poll_notice(1, 1).is_none());
    let wrong_tag = MatchNotice {
        communicator: 0,
        message: 1,
    }
    .to_vec();
    let mut other = job(2);
    other.sent_synchronous(1, 1, 0, 8);
    assert_eq!(
        check(other.handle_data(1, 9, wrong_tag.clone()).unwrap_err()),
        "notice_fields"
    );
    m.handle_data(1, 8, wrong_tag).unwrap();
    assert_eq!(m.poll_notice(1, 1), Some(Ok(())));
    assert!(m.poll_notice(1, 1).is_none(), "reported once");
    m.handle_departed(1);
    assert!(matches!(m.poll_notice(1, 2), Some(Err(_))));
}

#[test]
fn a_synchronous_send_to_this_rank_completes_when_its_receive_matches() {
    let mut m = job(2);
    let n = m.handle_local(0, 1, b"me".to_vec(), true);
    assert!(m.poll_notice(0, n).is_none());
    let r = m.post_on(0, Some(0), Some(1));
    assert_eq!(got(&mut m, r).2, b"me");
    assert_eq!(m.poll_notice(0, n), Some(Ok(())));
    assert!(m.take_notices().is_empty(), "no frame to itself");
}

#[test]
fn a_matched_probe_owns_its_message() {
    let mut m = job(2);
    m.handle_data(1, 2, frame(0, DataKind::Synchronous, 1, 3, b"abc"))
        .unwrap();
    let (id, st) = m.claim_on(0, None, Some(2)).unwrap();
    assert_eq!((st.source, st.len), (1, 3));
    assert_eq!(m.take_notices().len(), 1, "matched: noticed");
    assert!(
        m.probe_on(0, None, None).is_none(),
        "no other receive sees it"
    );
    assert_eq!(got(&mut m, id).2, b"abc");
}

#[test]
fn without_bit_3_nothing_changes() {
    let mut m = Matching::new(2, 0);
    m.set_features(FEATURE_V1_CORE | FEATURE_COMMUNICATORS)
        .unwrap();
    m.handle_data(1, 4, b"raw".to_vec()).unwrap();
    assert!(!m.has_p2p_communicators());
    let r = m.post(Some(1), Some(4));
    assert_eq!(got(&mut m, r).2, b"raw");
}

#[test]
fn only_an_unmatched_receive_is_cancelled() {
    let mut m = job(2);
    let open = m.post_on(0, Some(1), Some(1));
    assert!(m.try_cancel(open), "nothing matched: cancelled");
    m.handle_data(1, 1, msg(0, 1, b"kept")).unwrap();
    let r = m.post_on(0, Some(1), Some(1));
    assert!(!m.try_cancel(r), "it took the message: not cancelled");
    assert_eq!(got(&mut m, r).2, b"kept");
    // A message still coming: matched at its first frame, not cancelled.
    let total = (MAX_MESSAGE_FRAME_DATA + 1) as u64;
    let r = m.post_on(0, Some(1), Some(2));
    let first = frame(
        0,
        DataKind::Standard,
        2,
        total,
        &vec![0; MAX_MESSAGE_FRAME_DATA],
    );
    m.handle_data(1, 2, first).unwrap();
    assert!(!m.try_cancel(r));
}
