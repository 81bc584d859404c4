//! Matching without sockets.

use super::*;
use crate::proto::large::frames_of;
use sperli_wire::limits::MAX_PAYLOAD;

fn data(m: &mut Matching, from: u32, tag: u32, bytes: &[u8]) {
    m.handle_incoming(
        from,
        Incoming::Data {
            tag,
            payload: bytes.to_vec(),
        },
    )
    .unwrap();
}

fn got(m: &mut Matching, id: RecvId) -> (u32, u32, Vec<u8>) {
    let (st, msg) = m.poll_recv(id).expect("complete").expect("a message");
    assert_eq!(st.len, msg.len());
    (st.source, st.tag, msg)
}

#[test]
fn arrival_order_per_source_and_tag() {
    let mut m = Matching::new(3, 0);
    data(&mut m, 1, 5, b"a");
    data(&mut m, 1, 6, b"b");
    data(&mut m, 1, 5, b"c");
    let r = m.post(Some(1), Some(6));
    assert_eq!(got(&mut m, r), (1, 6, b"b".to_vec()));
    let r = m.post(Some(1), Some(5));
    assert_eq!(got(&mut m, r), (1, 5, b"a".to_vec()));
    let r = m.post(Some(1), None);
    assert_eq!(got(&mut m, r), (1, 5, b"c".to_vec()));
    let r = m.post(Some(1), None);
    assert!(m.poll_recv(r).is_none(), "nothing left: it waits");
}

#[test]
fn posted_receives_match_in_post_order() {
    let mut m = Matching::new(2, 0);
    let any = m.post(Some(1), None);
    let tagged = m.post(Some(1), Some(3));
    data(&mut m, 1, 3, b"first");
    data(&mut m, 1, 3, b"second");
    assert_eq!(got(&mut m, any), (1, 3, b"first".to_vec()));
    assert_eq!(got(&mut m, tagged), (1, 3, b"second".to_vec()));
}

#[test]
fn any_source_takes_the_first_to_arrive_among_three_senders() {
    let mut m = Matching::new(4, 0);
    data(&mut m, 3, 1, b"from 3");
    data(&mut m, 1, 1, b"from 1");
    data(&mut m, 2, 1, b"from 2");
    let order: Vec<u32> = (0..3)
        .map(|_| {
            let r = m.post(None, Some(1));
            got(&mut m, r).0
        })
        .collect();
    assert_eq!(order, vec![3, 1, 2]);
    // Posted first, then the senders race: the first arrival wins.
    let a = m.post(None, None);
    let b = m.post(None, None);
    data(&mut m, 2, 9, b"x");
    data(&mut m, 1, 8, b"y");
    assert_eq!(got(&mut m, a), (2, 9, b"x".to_vec()));
    assert_eq!(got(&mut m, b), (1, 8, b"y".to_vec()));
}

#[test]
fn any_source_skips_messages_of_other_tags() {
    let mut m = Matching::new(3, 0);
    data(&mut m, 1, 4, b"tag 4");
    data(&mut m, 2, 5, b"tag 5");
    let r = m.post(None, Some(5));
    assert_eq!(got(&mut m, r), (2, 5, b"tag 5".to_vec()));
}

#[test]
fn probe_peeks_without_taking() {
    let mut m = Matching::new(3, 0);
    assert_eq!(m.probe(None, None), None);
    data(&mut m, 2, 7, b"abc");
    data(&mut m, 1, 7, b"de");
    let st = m.probe(None, Some(7)).unwrap();
    assert_eq!((st.source, st.tag, st.len), (2, 7, 3));
    assert_eq!(m.probe(Some(1), None).unwrap().len, 2);
    assert_eq!(m.probe(Some(1), Some(8)), None);
    // The probed message is the one a receive then takes.
    let r = m.post(None, Some(7));
    assert_eq!(got(&mut m, r).0, 2);
}

#[test]
fn a_departed_source_ends_waits_that_nothing_queued_can_satisfy() {
    let mut m = Matching::new(3, 0);
    data(&mut m, 1, 1, b"last words");
    m.handle_departed(1);
    // What it sent before it left is still there.
    let r = m.post(Some(1), Some(1));
    assert_eq!(got(&mut m, r).2, b"last words");
    let r = m.post(Some(1), Some(1));
    assert_eq!(m.poll_recv(r), Some(Err(departed(1))));
    assert!(m.poll_recv(r).is_none(), "reported once, then gone");
    // Any source: only once every other rank left.
    let any = m.post(None, None);
    assert!(m.poll_recv(any).is_none());
    m.handle_departed(2);
    assert_eq!(m.poll_recv(any), Some(Err(departed(2))));
    // wait_on: the pick first, then the departure.
    m.handle_incoming(
        1,
        Incoming::Collective {
            tag: 0,
            payload: vec![1, 2],
        },
    )
    .unwrap();
    assert_eq!(
        m.wait_on(Some(1), |m| m.pop_collective(1).map(Ok)),
        Some(Ok(vec![1, 2]))
    );
    assert_eq!(
        m.wait_on(Some(1), |m| m.pop_collective(1).map(Ok)),
        Some(Err(departed(1)))
    );
    assert_eq!(m.wait_on(Some(0), |m| m.pop_collective(0).map(Ok)), None);
}

#[test]
fn collective_and_checkpoint_frames_keep_arrival_order_beside_data() {
    let mut m = Matching::new(2, 0);
    m.handle_incoming(
        1,
        Incoming::Collective {
            tag: 0,
            payload: vec![1],
        },
    )
    .unwrap();
    data(&mut m, 1, 0, b"d");
    m.handle_incoming(
        1,
        Incoming::Collective {
            tag: 0,
            payload: vec![2],
        },
    )
    .unwrap();
    let h = FrameHeader::new(
        sperli_wire::FrameType::CkptAck,
        sperli_wire::JobId([0; 16]),
        1,
        0,
        1,
    );
    m.handle_incoming(1, Incoming::Checkpoint(h, vec![9]))
        .unwrap();
    assert_eq!(m.pop_collective(1), Some(vec![1]));
    assert_eq!(m.pop_collective(1), Some(vec![2]));
    assert_eq!(m.pop_collective(1), None);
    assert_eq!(m.pop_ckpt(1).map(|(_, p)| p), Some(vec![9]));
    let r = m.post(Some(1), None);
    assert_eq!(got(&mut m, r).2, b"d");
}

#[test]
fn cancel_drops_the_receive_and_what_it_took() {
    let mut m = Matching::new(2, 0);
    let r = m.post(Some(1), None);
    m.cancel(r);
    data(&mut m, 1, 2, b"kept");
    let r2 = m.post(Some(1), None);
    assert_eq!(got(&mut m, r2).2, b"kept");
    data(&mut m, 1, 2, b"lost");
    let r3 = m.post(Some(1), None);
    m.cancel(r3);
    assert!(m.poll_recv(r3).is_none());
    assert_eq!(m.probe(None, None), None);
}

#[test]
fn a_large_receive_takes_queued_frames_then_streams_the_rest() {
    let max = MAX_PAYLOAD as usize;
    let msg: Vec<u8> = (0..2 * max + 100).map(|i| (i % 249) as u8).collect();
    let frames = frames_of(&msg);
    assert_eq!(frames.len(), 3);
    let mut m = Matching::new(2, 0);
    data(&mut m, 1, 4, &frames[0]);
    let r = m.post_large(1, 4);
    assert!(m.poll_recv(r).is_none());
    // The second frame streams, cut in pieces, straight into the assembly.
    let (id, mut asm) = m.start_stream(1, 4).expect("the large receive streams");
    assert_eq!(id, r);
    assert!(m.start_stream(1, 4).is_none(), "one frame at a time");
    for piece in frames[1].chunks(1 << 20) {
        asm.push(piece).unwrap();
    }
    m.end_stream(id, 1, 4, asm, None);
    assert!(m.poll_recv(r).is_none());
    // The third comes whole.
    data(&mut m, 1, 4, &frames[2]);
    assert_eq!(got(&mut m, r), (1, 4, msg));
}

#[test]
fn an_earlier_whole_receive_comes_before_a_large_one() {
    let mut m = Matching::new(2, 0);
    let whole = m.post(Some(1), None);
    let large = m.post_large(1, 4);
    assert!(m.start_stream(1, 4).is_none(), "the whole receive is first");
    data(&mut m, 1, 4, b"small");
    assert_eq!(got(&mut m, whole).2, b"small");
    assert!(m.start_stream(1, 4).is_some());
    assert!(m.start_stream(1, 5).is_none(), "another tag");
    let _ = large;
}

#[test]
fn a_broken_large_message_fails_its_receive() {
    let mut m = Matching::new(2, 0);
    let r = m.post_large(1, 4);
    data(&mut m, 1, 4, &[1, 2]);
    assert!(matches!(m.poll_recv(r), Some(Err(Error::FrameRejected(_)))));
    // A frame cut short while streaming.
    let r = m.post_large(1, 4);
    let (id, asm) = m.start_stream(1, 4).unwrap();
    m.end_stream(id, 1, 4, asm, Some(departed(1)));
    assert_eq!(m.poll_recv(r), Some(Err(departed(1))));
}

#[test]
fn written_and_undelivered_sends_report_once() {
    let mut m = Matching::new(2, 0);
    assert_eq!(m.poll_written(3), None);
    m.handle_written(3);
    m.handle_undelivered(4, 1);
    assert_eq!(m.poll_written(3), Some(Ok(())));
    assert_eq!(m.poll_written(3), None);
    assert_eq!(m.poll_written(4), Some(Err(departed(1))));
    m.count_send(true);
    m.count_recv(true);
    m.count_recv(true);
    m.count_recv(false);
    assert_eq!(m.open_handles(), (1, 1));
}

#[test]
fn a_large_receive_into_a_buffer_reuses_its_memory() {
    let msg: Vec<u8> = (0..1000).map(|i| i as u8).collect();
    let frames = frames_of(&msg);
    let mut m = Matching::new(2, 0);
    let mut buf = Vec::with_capacity(4096);
    buf.extend_from_slice(b"old contents");
    let ptr = buf.as_ptr();
    let r = m.post_large_into(1, 4, buf);
    data(&mut m, 1, 4, &frames[0]);
    let (_, got) = m.poll_recv(r).unwrap().unwrap();
    assert_eq!(got, msg);
    assert_eq!(got.as_ptr(), ptr, "the same allocation");
}

fn coll(m: &mut Matching, from: u32, tag: u32, p: &[u8]) {
    m.handle_incoming(
        from,
        Incoming::Collective {
            tag,
            payload: p.to_vec(),
        },
    )
    .unwrap();
}

/// Protocol §15.4: a take for communicator c gets the earliest frame of
/// that tag; the frames it passes over are shown to the judgement and stay.
#[test]
fn collective_takes_by_communicator() {
    let mut m = Matching::new(3, 0);
    coll(&mut m, 1, 5, b"a");
    coll(&mut m, 1, 0, b"b");
    coll(&mut m, 1, 5, b"c");
    let mut seen = Vec::new();
    let r: Option<Result<Vec<u8>, ()>> = m.pop_collective_where(1, 0, |t| {
        seen.push(t);
        Ok(())
    });
    assert_eq!(r, Some(Ok(b"b".to_vec())));
    assert_eq!(seen, vec![5]);
    assert_eq!(m.pop_collective(1), None, "only tag 5 is left");
    let r: Option<Result<Vec<u8>, u32>> = m.pop_collective_where(1, 7, Err);
    assert_eq!(r, Some(Err(5)), "a judged frame ends the take and stays");
    assert_eq!(
        m.pop_collective_where::<()>(1, 5, |_| Ok(())),
        Some(Ok(b"a".to_vec()))
    );
    assert_eq!(
        m.pop_collective_where::<()>(1, 5, |_| Ok(())),
        Some(Ok(b"c".to_vec()))
    );
    assert_eq!(m.pop_collective_where::<()>(2, 5, |_| Ok(())), None);
}

#[test]
fn kept_collective_frames_are_judged_again_with_the_job_features() {
    use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_V1_CORE};
    let star = sperli_wire::collective::CollectiveHeader {
        operation: sperli_wire::collective::Operation::Barrier,
        element_type: 0,
        reduction: 0,
        phase: sperli_wire::collective::Phase::ToRoot,
        root: 0,
        sequence: 1,
    }
    .to_bytes();
    let mut m = Matching::new(3, 0);
    coll(&mut m, 1, 0, &star);
    assert_eq!(m.recheck_collective(FEATURE_V1_CORE), Ok(()));
    coll(&mut m, 2, 4, &star);
    assert_eq!(m.recheck_collective(FEATURES_IMPLEMENTED), Ok(()));
    assert!(matches!(
        m.recheck_collective(FEATURE_V1_CORE),
        Err((2, sperli_wire::error::FrameError::NonZeroTag { got: 4, .. }))
    ));
}

const FULL: usize = sperli_wire::limits::MAX_PAYLOAD as usize;

/// Protocol §7.2: frames of exactly 16777216 bytes go on into the next of
/// the same source and tag; posted and queued alike, in post order.
#[test]
fn joined_receives_take_the_whole_message() {
    let mut m = Matching::new(3, 0);
    // Queued whole before the receive: joined at once, the short frame of
    // another tag in between stays.
    data(&mut m, 1, 3, &vec![1; FULL]);
    data(&mut m, 1, 4, b"other");
    data(&mut m, 1, 3, b"end");
    assert_eq!(
        m.probe_joined(Some(1), Some(3)).map(|s| s.len),
        Some(FULL + 3)
    );
    let r = m.post_joined(None, Some(3));
    let (st, msg) = m.poll_recv(r).unwrap().unwrap();
    assert_eq!(
        (st.source, st.tag, st.len, msg.len()),
        (1, 3, FULL + 3, FULL + 3)
    );
    assert_eq!(&msg[FULL..], b"end");
    // Half there: the probe says nothing yet, the receive waits for the
    // rest, and a receive posted after it does not steal it.
    data(&mut m, 2, 3, &vec![2; FULL]);
    assert_eq!(m.probe_joined(None, Some(3)), None);
    let first = m.post_joined(None, Some(3));
    let second = m.post_joined(None, Some(3));
    assert!(m.poll_recv(first).is_none());
    data(&mut m, 2, 3, &vec![3; FULL]);
    data(&mut m, 2, 3, b"");
    data(&mut m, 1, 3, b"next");
    let (st, msg) = m.poll_recv(first).unwrap().unwrap();
    assert_eq!((st.source, st.len), (2, 2 * FULL));
    assert_eq!((msg[0], msg[FULL]), (2, 3));
    let (st, msg) = m.poll_recv(second).unwrap().unwrap();
    assert_eq!((st.source, msg), (1, b"next".to_vec()));
    // The sender leaves in the middle: the receive fails.
    data(&mut m, 2, 8, &vec![0; FULL]);
    let cut = m.post_joined(Some(2), Some(8));
    m.handle_departed(2);
    assert_eq!(m.poll_recv(cut), Some(Err(departed(2))));
}
