//! Feature bit 5 over TLS (protocol §18.6, §18.8): three ranks as threads,
//! each with a control channel whose other end this test holds and drives
//! as the launcher does (the `Decider`, the record signed with the job
//! key). Rank 2 leaves with ABORT reason 1 (a rank that ends itself);
//! ranks 0 and 1 revoke, report, apply the shrink record and go on talking
//! in the new epoch.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sperli_tls::composite_sig;
use sperli_tls::job_plan::JobPlan;
use sperli_transport::proto::recovery::decider::{Decider, DeciderOutput};
use sperli_transport::{Endpoint, Settings};
use sperli_wire::abort::AbortReason;
use sperli_wire::job_description::JobDescription;
use sperli_wire::recovery::{Mode, RecoveryError, Report, CONTEXT_MEMBER, FEATURE_MEMBERSHIP};
use sperli_wire::Error;

use crate::common::{settings, with_deadline};

fn revoked(r: Result<impl std::fmt::Debug, Error>) -> u32 {
    match r {
        Err(Error::Recovery(RecoveryError::Revoked { epoch })) => epoch,
        other => panic!("expected the revoked error, got {other:?}"),
    }
}

/// Plays the launcher for `survivors`' channels: reads their REPORTs,
/// decides with the `Decider` (rank `lost` seen ending), signs and writes
/// the record to every member it names. Returns the reports it read, and
/// the channels (a launcher keeps them open while its ranks run: a rank
/// whose channel ends treats the launcher as lost, protocol §18.6).
fn launcher(
    plan: &JobPlan,
    ends: Vec<(u32, UnixStream)>,
    lost: u32,
) -> (Vec<Report>, Vec<(u32, UnixStream)>) {
    let mut decider = Decider::new(plan.job_id, 3, plan.incarnation, Mode::Shrink, 0);
    let start = Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    decider.handle_exit(lost, plan.incarnation, now());
    let mut readers: Vec<(u32, BufReader<UnixStream>)> = ends
        .iter()
        .map(|(r, s)| {
            let s = s.try_clone().unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            (*r, BufReader::new(s))
        })
        .collect();
    let mut reports = Vec::new();
    loop {
        assert!(start.elapsed() < Duration::from_secs(20), "no decision");
        for (_, reader) in &mut readers {
            let mut line = String::new();
            if reader.read_line(&mut line).is_ok() && line.ends_with('\n') {
                let bytes = sperli_wire::hex::decode(line.trim_end().as_bytes()).unwrap();
                let report = Report::decode(&bytes).unwrap();
                reports.push(report.clone());
                decider.handle_report(report, now());
            }
        }
        decider.poll_timers(now());
        while let Some(out) = decider.poll_output() {
            match out {
                DeciderOutput::Fence { rank } => assert_eq!(rank, lost),
                DeciderOutput::Issue { mut record, to } => {
                    let sig =
                        composite_sig::sign(&plan.job_key, &record.signed_bytes(), CONTEXT_MEMBER)
                            .unwrap();
                    record.signature = sig.0.to_vec();
                    let line = format!("{}\n", sperli_wire::hex::encode(&record.encode()));
                    for r in to {
                        let (_, s) = ends.iter().find(|(n, _)| *n == r).unwrap();
                        // A survivor may have the record from a peer already
                        // (protocol §18.6), be done and gone: its channel
                        // then refuses the write.
                        let _ = (&*s).write_all(line.as_bytes());
                    }
                    return (reports, ends);
                }
                DeciderOutput::FullRestart(c) => panic!("full restart: {c:?}"),
            }
        }
    }
}

/// Each rank of `plan`: its control channel's launcher end, its job
/// description and its settings (its end of the channel, its listener).
fn with_channels(plan: &JobPlan) -> Vec<(u32, UnixStream, JobDescription, Settings)> {
    (0..plan.size())
        .map(|r| {
            let (ours, theirs) = UnixStream::pair().unwrap();
            let mut s = settings();
            s.control = Some(Arc::new(theirs));
            s.recoverable = true;
            s.listener = plan.take_listener(r);
            (r, ours, plan.description(r), s)
        })
        .collect()
}

/// Starts the three ranks of `plan` as threads, each running
/// `body(rank, endpoint)` after set-up, except rank 2, which leaves with
/// ABORT reason 1 (a rank that ends itself) once both others are set up.
/// Returns the launcher ends of the channels and the threads.
#[allow(clippy::type_complexity)]
fn rank_2_leaves<T: Send + 'static>(
    plan: &JobPlan,
    body: fn(u32, Endpoint) -> T,
) -> (
    Vec<(u32, UnixStream)>,
    Vec<std::thread::JoinHandle<Option<T>>>,
) {
    let mut launcher_ends = Vec::new();
    let mut ranks = Vec::new();
    for (r, ours, desc, s) in with_channels(plan) {
        launcher_ends.push((r, ours));
        ranks.push(std::thread::spawn(move || {
            let ep = Endpoint::start(&desc, s).unwrap();
            assert_eq!(ep.features() & FEATURE_MEMBERSHIP, FEATURE_MEMBERSHIP);
            assert_eq!(ep.membership().epoch, 1);
            if r == 2 {
                // Both others are set up once their words came.
                ep.recv(0, 1).unwrap();
                ep.recv(1, 1).unwrap();
                ep.abort(AbortReason::PeerLost, 1613, "rank 2 leaves on purpose");
                return None;
            }
            Some(body(r, ep))
        }));
    }
    (launcher_ends, ranks)
}

#[test]
fn a_lost_rank_is_revoked_reported_and_shrunk_away() {
    with_deadline(Duration::from_secs(90), || {
        let plan = JobPlan::localhost_bound(3).unwrap();
        let (mut launcher_ends, ranks) = rank_2_leaves(&plan, |r, ep| {
            ep.send(2, 1, b"ready").unwrap();
            let other = 1 - r;
            // Rank 2 never answers: the pending receive is revoked.
            assert_eq!(revoked(ep.recv(2, 7)), 1);
            // So is every call until the program recovers.
            assert_eq!(revoked(ep.send(other, 3, b"too early")), 1);
            let m = ep.recover().unwrap();
            assert_eq!((m.epoch, m.mode), (2, Some(Mode::Shrink)));
            assert_eq!(
                (m.members.as_slice(), m.failed.as_slice()),
                (&[0, 1][..], &[2][..])
            );
            // The new epoch: messages between the survivors, both ways,
            // numbered from 1 again (protocol §18.2).
            for i in 0..3u8 {
                ep.send(other, 9, &[r as u8, i]).unwrap();
                assert_eq!(ep.recv(other, 9).unwrap(), vec![other as u8, i]);
            }
            ep.set_errors(sperli_transport::ErrorMode::Return);
            m
        });
        // Rank 2's channel stays open (a launcher keeps it until the
        // process ended); its end is not read.
        let lost_end = launcher_ends.pop();
        let (reports, ends) = launcher(&plan, launcher_ends, 2);
        assert!(reports.iter().all(|r| r.epoch == 1 && r.suspects == [2]));
        let got: Vec<_> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
        drop((lost_end, ends));
        assert!(got[0].is_some() && got[1].is_some() && got[2].is_none());
    });
}

fn comm_revoked(r: Result<impl std::fmt::Debug, Error>) -> u32 {
    match r {
        Err(Error::Recovery(RecoveryError::CommunicatorRevoked { comm })) => comm,
        other => panic!("expected the communicator's revoked error, got {other:?}"),
    }
}

/// Runs `body(rank, endpoint)` on each of three ranks with control
/// channels whose launcher ends nobody reads (no recovery comes).
fn three_ranks(body: fn(u32, Endpoint)) {
    let plan = JobPlan::localhost_bound(3).unwrap();
    let mut channels = Vec::new();
    let mut ranks = Vec::new();
    for (r, ours, desc, s) in with_channels(&plan) {
        channels.push(ours);
        ranks.push(std::thread::spawn(move || {
            body(r, Endpoint::start(&desc, s).unwrap())
        }));
    }
    for h in ranks {
        h.join().unwrap();
    }
    drop(channels);
}

/// Protocol §18.8.1: one rank revokes communicator 0; the others' pending
/// receives on it fail, and so does every later call on it, everywhere.
#[test]
fn a_revoked_communicator_fails_its_calls_on_every_member() {
    with_deadline(Duration::from_secs(60), || {
        three_ranks(|r, ep| {
            if r == 1 {
                assert!(!ep.is_communicator_revoked(0));
                ep.revoke_communicator(0).unwrap();
                assert_eq!(comm_revoked(ep.send(0, 5, b"late")), 0);
            } else {
                // Nothing ever comes: the revoke ends the wait.
                assert_eq!(comm_revoked(ep.recv(1, 5)), 0);
                assert_eq!(comm_revoked(ep.send(2 - r, 5, b"late")), 0);
            }
            assert!(ep.is_communicator_revoked(0));
            // The membership is untouched: no recovery, no REPORT.
            assert_eq!(ep.membership().epoch, 1);
        })
    });
}

/// Protocol §18.6: the program's own abort (ABORT reason 2, MPI's
/// `MPI_Abort`) ends the job as in v1, with bit 5 too: no recovery.
#[test]
fn an_application_abort_ends_the_job_with_bit_5_too() {
    with_deadline(Duration::from_secs(60), || {
        three_ranks(|r, ep| {
            if r == 2 {
                // Both others are set up once their words came.
                ep.recv(0, 1).unwrap();
                ep.recv(1, 1).unwrap();
                ep.abort(AbortReason::Application, 7, "the program gives up");
                return;
            }
            ep.send(2, 1, b"ready").unwrap();
            // The other survivor ends with the job too and closes: a rank
            // may see that close before rank 2's ABORT, and revoke first;
            // its recovery then ends with the ABORT (protocol §18.6).
            let e = match ep.recv(2, 5) {
                Err(Error::Recovery(RecoveryError::Revoked { .. })) => ep.recover().unwrap_err(),
                Err(e) => e,
                Ok(m) => panic!("a message came: {m:?}"),
            };
            assert!(
                matches!(
                    e,
                    Error::AbortedByPeer {
                        from: 2,
                        reason: 2,
                        ..
                    }
                ),
                "expected rank 2's abort, got {e:?}"
            );
            assert_eq!(ep.membership().epoch, 1);
        })
    });
}

/// What the test's launcher issues for the replacement of `rank`
/// (protocol §18.7): a new certificate, a join token for the new
/// incarnation, on a new port of 127.0.0.1 (its listener, bound), and the
/// record's change entry.
fn replacement_of(
    plan: &JobPlan,
    rank: u32,
    incarnation: u32,
) -> (JobDescription, Settings, sperli_wire::recovery::Change) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let identity = plan.ca.issue_rank(rank, "127.0.0.1").unwrap();
    let der = CertificateDer::from_pem_slice(identity.cert_pem.as_bytes()).unwrap();
    let mut desc = plan.description(rank);
    desc.incarnation = incarnation;
    desc.hosts[rank as usize] = sperli_wire::job_description::HostEntry {
        host: "127.0.0.1".to_owned(),
        port,
    };
    desc.join_token = sperli_tls::join_token::create_token(
        &plan.job_key,
        &sperli_wire::join_token::JoinTokenMessage {
            job_id: plan.job_id,
            rank,
            size: plan.size(),
            incarnation,
            expires_at_ms: plan.expires_at_ms,
            host: "127.0.0.1",
        },
    )
    .unwrap();
    desc.rank_cert_pem = identity.cert_pem.as_bytes().to_vec();
    desc.rank_key_pem = identity.key_pem().as_bytes().to_vec();
    let mut s = settings();
    s.listener = Some(Arc::new(listener));
    s.replacement = true;
    s.recoverable = true;
    let change = sperli_wire::recovery::Change {
        rank,
        cert_sha256: sperli_wire::ids::Sha256Digest::of(der.as_ref()),
        endpoint: Some((port, "127.0.0.1".to_owned())),
    };
    (desc, s, change)
}

/// Protocol §18.7: rank 2 leaves; the launcher issues its replacement
/// (incarnation 2, a new certificate and port) and a replace record; the
/// survivors keep their processes and connections, accept the
/// replacement's connection after set-up, and all three talk in epoch 2.
/// The failed rank's old certificate is refused (check 3).
#[test]
fn a_lost_rank_is_replaced_and_the_survivors_keep_their_connections() {
    with_deadline(Duration::from_secs(90), || {
        let plan = JobPlan::localhost_bound(3).unwrap();
        let (mut launcher_ends, ranks) = rank_2_leaves(&plan, |r, ep| {
            ep.set_errors(sperli_transport::ErrorMode::Return);
            ep.send(2, 1, b"ready").unwrap();
            assert_eq!(revoked(ep.recv(2, 7)), 1);
            let m = ep.recover().unwrap();
            assert_eq!(
                (m.epoch, m.mode, m.rollback),
                (2, Some(Mode::Replace), Some(0))
            );
            assert_eq!((m.members.as_slice(), m.failed.len()), (&[0, 1, 2][..], 0));
            let other = 1 - r;
            for i in 0..3u8 {
                ep.send(2, 9, &[r as u8, i]).unwrap();
                ep.send(other, 9, &[r as u8, i]).unwrap();
                assert_eq!(ep.recv(2, 9).unwrap(), vec![2, i]);
                assert_eq!(ep.recv(other, 9).unwrap(), vec![other as u8, i]);
            }
            m
        });
        let lost_end = launcher_ends.pop();
        // The launcher's side, with a replace decision.
        let mut decider = Decider::new(plan.job_id, 3, plan.incarnation, Mode::Replace, 1);
        let start = Instant::now();
        let now = || start.elapsed().as_millis() as u64;
        decider.handle_exit(2, plan.incarnation, now());
        let mut readers: Vec<BufReader<UnixStream>> = launcher_ends
            .iter()
            .map(|(_, s)| {
                let s = s.try_clone().unwrap();
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                BufReader::new(s)
            })
            .collect();
        let replacement = loop {
            assert!(start.elapsed() < Duration::from_secs(20), "no decision");
            for reader in &mut readers {
                let mut line = String::new();
                if reader.read_line(&mut line).is_ok() && line.ends_with('\n') {
                    let bytes = sperli_wire::hex::decode(line.trim_end().as_bytes()).unwrap();
                    decider.handle_report(Report::decode(&bytes).unwrap(), now());
                }
            }
            decider.poll_timers(now());
            let (mut record, to) = match decider.poll_output() {
                None => continue,
                // It ended already (its exit is known).
                Some(DeciderOutput::Fence { rank: 2 }) => continue,
                Some(DeciderOutput::Issue { record, to }) => (record, to),
                Some(out) => panic!("expected a record, got {out:?}"),
            };
            assert_eq!((record.mode, to.as_slice()), (Mode::Replace, &[0, 1][..]));
            let inc = record.incarnations[2];
            let (desc, mut s, change) = replacement_of(&plan, 2, inc);
            record.changes = vec![change];
            let sig =
                composite_sig::sign(&plan.job_key, &record.signed_bytes(), CONTEXT_MEMBER).unwrap();
            record.signature = sig.0.to_vec();
            let line = format!("{}\n", sperli_wire::hex::encode(&record.encode()));
            for (_, c) in &launcher_ends {
                let _ = (&*c).write_all(line.as_bytes());
            }
            // Check 3: the failed rank's old certificate, with the new
            // join token, is refused; the survivors wait on.
            let mut old = desc.clone();
            let first = plan.description(2);
            old.rank_cert_pem = first.rank_cert_pem.clone();
            old.rank_key_pem = first.rank_key_pem.clone();
            let (old_ours, old_theirs) = UnixStream::pair().unwrap();
            (&old_ours).write_all(line.as_bytes()).unwrap();
            let mut old_s = settings();
            old_s.control = Some(Arc::new(old_theirs));
            old_s.listener = s.listener.clone();
            old_s.replacement = true;
            old_s.setup_window = Duration::from_millis(1500);
            match Endpoint::start(&old, old_s) {
                Err(Error::Authentication { .. } | Error::SetupTimeout { .. }) => {}
                other => panic!("the old certificate joined: {:?}", other.map(|_| ())),
            }
            drop(old_ours);
            let (ours, theirs) = UnixStream::pair().unwrap();
            (&ours).write_all(line.as_bytes()).unwrap();
            s.control = Some(Arc::new(theirs));
            let rep = std::thread::spawn(move || {
                let ep = Endpoint::start(&desc, s).unwrap();
                let m = ep.membership();
                assert_eq!((m.epoch, m.mode), (2, Some(Mode::Replace)));
                for i in 0..3u8 {
                    for p in [0u32, 1] {
                        ep.send(p, 9, &[2, i]).unwrap();
                    }
                    for p in [0u32, 1] {
                        assert_eq!(ep.recv(p, 9).unwrap(), vec![p as u8, i]);
                    }
                }
                m
            });
            break (rep, ours);
        };
        let got: Vec<_> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
        let (rep, ours) = replacement;
        assert_eq!(rep.join().unwrap().epoch, 2);
        drop((lost_end, launcher_ends, ours));
        assert!(got[0].is_some() && got[1].is_some() && got[2].is_none());
    });
}

/// Protocol §18.6 with a program that cannot go on after a loss
/// (`Settings::recoverable` false, as under `--recover inplace` outside
/// `Checkpointer::run`): a lost peer ends the job step as in v1, with the
/// lost peer's error, not the revoked one, and no recovery.
#[test]
fn a_program_that_cannot_go_on_sees_a_lost_peer_as_in_v1() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(3).unwrap();
        let mut channels = Vec::new();
        let mut ranks = Vec::new();
        for (r, ours, desc, mut s) in with_channels(&plan) {
            s.recoverable = false;
            channels.push(ours);
            ranks.push(std::thread::spawn(move || {
                let ep = Endpoint::start(&desc, s).unwrap();
                assert_eq!(ep.features() & FEATURE_MEMBERSHIP, FEATURE_MEMBERSHIP);
                assert!(!ep.recoverable());
                if r == 2 {
                    ep.recv(0, 1).unwrap();
                    ep.recv(1, 1).unwrap();
                    ep.abort(AbortReason::PeerLost, 1613, "rank 2 leaves on purpose");
                    return;
                }
                ep.send(2, 1, b"ready").unwrap();
                match ep.recv(2, 7) {
                    Err(Error::AbortedByPeer { .. } | Error::PeerLost { .. }) => {}
                    other => panic!("expected the lost peer's error, got {other:?}"),
                }
                assert_eq!(ep.membership().epoch, 1);
            }));
        }
        for h in ranks {
            h.join().unwrap();
        }
        drop(channels);
    });
}
