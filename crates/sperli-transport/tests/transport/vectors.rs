//! Every negative frame vector of docs/sperli-vectors.txt, sent over real
//! TLS by a hostile peer that holds a valid certificate and token and sent
//! a correct HELLO: the victim rejects each with H1610 naming the vector's
//! check and sends ABORT reason 7 (code 1610); the older-incarnation vector
//! is discarded and the connection goes on. The hostile peer's HELLO
//! announces the vector's `features=` (absent: 1), so the job negotiates
//! exactly those (every other rank announces every bit): checks 12 and 13
//! are judged on arrival with them (protocol §6.2). Vectors of features
//! the transport does not implement yet are left out.

use std::io::Write;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::Endpoint;
use sperli_wire::frame::encode_frame_bytes;
use sperli_wire::header::{check_name, FrameHeader, RawHeader};
use sperli_wire::{hex, Error, FrameType, JobId};

use crate::common::{held_listener, run_ranks, settings, with_deadline};
use crate::hostile::{accept_as, hello_with, read_until};

struct Vector {
    name: String,
    own: u32,
    peer: u32,
    job: JobId,
    incarnation: u32,
    bytes: Vec<u8>,
    verdict: String,
    features: u64,
}

fn field(list: &str, key: &str) -> String {
    list.split(' ')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
        .unwrap_or_default()
}

fn negative_frame_vectors() -> Vec<Vector> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/sperli-vectors.txt");
    let text = std::fs::read_to_string(path).expect("docs/sperli-vectors.txt");
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let get = |k: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(": ").map(str::to_string))
        };
        if get("kind").as_deref() != Some("frame") {
            continue;
        }
        let verdict = get("verdict").unwrap_or_default();
        if verdict == "accept" {
            continue;
        }
        let rx = get("receiver").unwrap_or_default();
        let features: u64 = field(&rx, "features").parse().unwrap_or(1);
        // A frame of a job that negotiated a feature this transport does
        // not implement yet (protocol §16-18) is judged by the codecs'
        // vectors check and the independent checker, not here.
        if features & !sperli_wire::limits::FEATURES_IMPLEMENTED != 0 {
            continue;
        }
        let job: [u8; 16] = hex::decode(field(&rx, "job").as_bytes())
            .unwrap()
            .try_into()
            .unwrap();
        out.push(Vector {
            name: get("name").unwrap_or_default(),
            own: field(&rx, "rank").parse().unwrap(),
            peer: field(&rx, "peer").parse().unwrap(),
            job: JobId(job),
            incarnation: field(&rx, "incarnation").parse().unwrap(),
            bytes: hex::decode(get("bytes").unwrap_or_default().as_bytes()).unwrap(),
            verdict,
            features,
        });
    }
    out
}

/// The vector's header fields moved onto this job of size 3 (the vectors'
/// size): the victim is rank 1, the hostile peer rank 2, rank 0 a
/// bystander; a field that the vector makes wrong stays wrong.
fn rebase(v: &Vector, plan: &JobPlan) -> Vec<u8> {
    let mut h = RawHeader::from_bytes(v.bytes[..52].try_into().unwrap());
    if h.job_id == v.job {
        h.job_id = plan.job_id;
    }
    h.source = if h.source == v.peer { 2 } else { 0 };
    h.target = if h.target == v.own { 1 } else { 0 };
    h.incarnation =
        (plan.incarnation as i64 + (h.incarnation as i64 - v.incarnation as i64)) as u32;
    let mut out = h.to_bytes().to_vec();
    out.extend_from_slice(&v.bytes[52..]);
    out
}

fn run_one(v: &Vector) {
    let plan = Arc::new(JobPlan::localhost_bound(3).unwrap());
    let l = held_listener(&plan, 2);
    let bytes = rebase(v, &plan);
    let discard = v.verdict == "discard";
    let features = v.features;
    let p = plan.clone();
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let hostile = thread::spawn(move || {
        let mut streams = Vec::new();
        for _ in 0..2 {
            let (rank, mut s) = accept_as(&p, 2, &l);
            s.write_all(&hello_with(&p, 2, rank, p.token(2), features))
                .unwrap();
            s.flush().unwrap();
            streams.push((rank, s));
        }
        // Both ranks are set up: the job's features are negotiated.
        for _ in 0..2 {
            up_rx.recv().unwrap();
        }
        let (_, s) = streams.iter_mut().find(|(r, _)| *r == 1).unwrap();
        s.write_all(&bytes).unwrap();
        if discard {
            let h = FrameHeader::new(FrameType::Data, p.job_id, 2, 1, p.incarnation).with_tag(3);
            s.write_all(&encode_frame_bytes(h, b"after the discarded frame"))
                .unwrap();
        }
        s.flush().unwrap();
        let abort = read_until(s, FrameType::Abort);
        drop(streams);
        abort
    });
    let res = run_ranks(&plan, &[0, 1], settings(), move |ep: Endpoint| {
        let _ = up_tx.send(());
        if ep.rank() == 0 {
            // The bystander waits until the job ends one way or the other.
            return ep.recv(1, 99);
        }
        if discard {
            let m = ep.recv(2, 3)?;
            ep.abort(sperli_wire::abort::AbortReason::Application, 0, "done");
            Ok(m)
        } else {
            ep.recv(2, 0)
        }
    });
    let abort = hostile.join().unwrap();
    let mut res = res.into_iter();
    let bystander = res.next().unwrap();
    let r = res.next().unwrap();
    assert!(bystander.is_err(), "{}: the bystander went on", v.name);
    if discard {
        assert_eq!(r.unwrap(), b"after the discarded frame", "{}", v.name);
        return;
    }
    let e = r.expect_err(&v.name);
    let Error::FrameRejected(fe) = &e else {
        panic!("{}: {e}", v.name)
    };
    let want = v.verdict.rsplit(' ').next().unwrap();
    assert_eq!(check_name(fe), want, "{}: {e}", v.name);
    let abort = abort.unwrap_or_else(|| panic!("{}: no ABORT", v.name));
    assert_eq!(&abort[..8], &[7, 0, 0, 0, 0x4a, 0x06, 0, 0], "{}", v.name);
}

#[test]
fn every_negative_frame_vector_over_tls() {
    let vectors = negative_frame_vectors();
    assert!(
        vectors.len() >= 30,
        "only {} negative frame vectors",
        vectors.len()
    );
    with_deadline(Duration::from_secs(240), move || {
        for v in &vectors {
            run_one(v);
        }
    });
}
