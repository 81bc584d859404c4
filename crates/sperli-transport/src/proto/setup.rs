//! The policy of connection set-up, sans I/O (protocol §5): whom to dial
//! when, which rank an accepted connection may be, what a second
//! connection for a rank means, how long a dialled peer that finished TLS
//! is waited for, and which error ends a set-up that did not complete.
//!
//! Driven by `handle_*` (a dial failed, a socket was dropped, a peer
//! authenticated) and polled with `poll_*(now)` (dials due, the deadline).

use std::time::{Duration, Instant};

use sperli_tls::pki::rank_from_cn;
use sperli_wire::error::{AuthError, FrameError};
use sperli_wire::{Error, JobId};

/// One rank's set-up (see the module docs).
#[derive(Debug)]
pub struct Setup {
    window: Duration,
    retry: Duration,
    deadline: Instant,
    /// Per higher rank: when to dial next (`None`: a dial is under way, or
    /// the peer is authenticated, or a lower rank: it dials us).
    redial: Vec<Option<Instant>>,
    authenticated: Vec<bool>,
    /// Per rank: whether it may dial us (v1: the lower ranks, protocol
    /// §2.1; a replacement: the lower replacements, §18.7).
    accepts: Vec<bool>,
    /// The last failure to authenticate: H1611 at the deadline.
    auth_error: Option<Error>,
    done: bool,
}

impl Setup {
    /// Set-up of `rank` in a job of `size`, starting at `now`: every higher
    /// rank is due to be dialled at once ("The rank with the lower number
    /// connects to the rank with the higher number", protocol §2.1), a
    /// failed try is repeated after `retry` ("A refused or failed TCP
    /// connect is retried every 100 ms for 30 s", protocol §5.1 step 2), and
    /// the whole set-up ends after `window`.
    pub fn new(rank: u32, size: u32, window: Duration, retry: Duration, now: Instant) -> Self {
        let redial = (0..size)
            .map(|r| if r > rank { Some(now) } else { None })
            .collect();
        let mut authenticated = vec![false; size as usize];
        if let Some(me) = authenticated.get_mut(rank as usize) {
            *me = true;
        }
        Self {
            window,
            retry,
            deadline: now + window,
            redial,
            authenticated,
            accepts: (0..size).map(|r| r < rank).collect(),
            auth_error: None,
            done: size <= 1,
        }
    }

    /// The set-up of a replacement of `rank` (protocol §18.7) into the
    /// membership `incarnations` (`inc[n]`, 0: not a member) whose
    /// replaced ranks are `replaced`: it dials every member, lower and
    /// higher, except the lower replacements, which dial it ("between two
    /// replacements the lower dials the higher"); ranks that are not
    /// members are not waited for.
    pub fn replacement(
        rank: u32,
        incarnations: &[u32],
        replaced: &[u32],
        window: Duration,
        retry: Duration,
        now: Instant,
    ) -> Self {
        let size = incarnations.len() as u32;
        let mut me = Self::new(rank, size, window, retry, now);
        for r in 0..size {
            let i = r as usize;
            let member = incarnations[i] != 0;
            let lower_replacement = r < rank && replaced.contains(&r);
            me.accepts[i] = member && lower_replacement;
            me.redial[i] = (member && r != rank && !lower_replacement).then_some(now);
            if !member {
                me.authenticated[i] = true;
            }
        }
        me.done = me.authenticated.iter().all(|a| *a);
        me
    }

    /// True once every peer is authenticated: "When every one of its `size -
    /// 1` connections has an authenticated peer, the rank's set-up is
    /// complete." (protocol §5.1 step 6)
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The set-up deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The ranks to dial now; each is then "under way" until
    /// [`Setup::handle_dial_failed`] or [`Setup::handle_dropped`].
    pub fn poll_dials(&mut self, now: Instant) -> Vec<u32> {
        if self.done || now >= self.deadline {
            return Vec::new();
        }
        let mut due = Vec::new();
        for (r, at) in self.redial.iter_mut().enumerate() {
            if at.is_some_and(|t| now >= t) {
                *at = None;
                due.push(r as u32);
            }
        }
        due
    }

    /// A dial of `rank` failed before a socket existed (no address, the
    /// connect refused): try again after the retry interval.
    pub fn handle_dial_failed(&mut self, rank: u32, now: Instant) {
        self.schedule(rank, now);
    }

    fn schedule(&mut self, rank: u32, now: Instant) {
        if !self.done && !self.is_authenticated(rank) {
            if let Some(slot) = self.redial.get_mut(rank as usize) {
                *slot = Some(now + self.retry);
            }
        }
    }

    /// True once `rank` has an authenticated connection.
    pub fn is_authenticated(&self, rank: u32) -> bool {
        self.authenticated
            .get(rank as usize)
            .copied()
            .unwrap_or(false)
    }

    fn may_dial_us(&self, rank: u32) -> bool {
        self.accepts.get(rank as usize).copied().unwrap_or(false)
    }

    /// A connection that did not (yet) authenticate was dropped: the TLS
    /// handshake, the subject check or the HELLO failed, or its socket
    /// did. `dialled` names the rank we dialled (dialled again after the
    /// retry interval); `peer` the rank it was or claimed to be, if known.
    /// "A connection that fails the TLS handshake, the certificate subject
    /// check, or the HELLO and join token checks ... is closed and does not
    /// count" (protocol §5.3); only authentication failures count for H1611
    /// at the deadline.
    pub fn handle_dropped(
        &mut self,
        dialled: Option<u32>,
        peer: Option<u32>,
        error: Option<Error>,
        now: Instant,
    ) {
        if let Some(r) = dialled {
            self.schedule(r, now);
        }
        let peer = peer.or(dialled);
        self.auth_error = match error {
            Some(e @ (Error::Authentication { .. } | Error::HostRefused { .. })) => Some(e),
            // "including a first frame that is not a valid HELLO" (protocol
            // §5.3). Only a frame before any HELLO verified comes here: the
            // connection stops its feed right after the HELLO, so a frame
            // behind it is the authenticated peer's and ends the job.
            Some(Error::FrameRejected(FrameError::Unexpected {
                frame_type,
                when: "before HELLO",
            })) => Some(Error::Authentication {
                peer,
                error: AuthError::NotHello { got: frame_type },
            }),
            Some(Error::FrameRejected(f)) => Some(Error::Authentication {
                peer,
                error: AuthError::BadFirstFrame(f),
            }),
            _ => return,
        };
    }

    /// The rank an accepted connection may be, from its certificate's CN:
    /// a lower rank (it dials us, protocol §2.1) without an authenticated
    /// connection yet (protocol §5.3: "A second connection that claims a
    /// rank which already has an authenticated connection is closed and does
    /// not count either"). Anything else is a subject failure (H1611:
    /// "the accepting side expects a lower rank that is not yet connected",
    /// protocol §2.2).
    pub fn accepted_rank(&self, job: &JobId, cn: &str) -> Result<u32, Error> {
        let r = rank_from_cn(job, cn);
        match r {
            Some(r) if self.may_dial_us(r) && !self.is_authenticated(r) => Ok(r),
            _ => Err(Error::Authentication {
                peer: r,
                error: AuthError::Subject {
                    expected: format!("sperli-{}-<lower rank not yet connected>", job.to_hex()),
                    got: cn.to_owned(),
                },
            }),
        }
    }

    /// `rank`'s HELLO verified on a connection. False for a second
    /// connection that claims an authenticated rank: "it does not disturb
    /// the existing connection" (protocol §5.3, duplicate connections).
    pub fn handle_authenticated(&mut self, rank: u32) -> bool {
        match self.authenticated.get_mut(rank as usize) {
            Some(a) if !*a => *a = true,
            _ => return false,
        }
        if let Some(slot) = self.redial.get_mut(rank as usize) {
            *slot = None;
        }
        self.done = self.authenticated.iter().all(|a| *a);
        true
    }

    /// Whether a connection awaiting its peer's HELLO keeps waiting past
    /// the silence limit: a peer we dialled that finished TLS with a
    /// certificate of this job is alive, only slow, and is waited for until
    /// the set-up deadline (protocol §5.2, refinement: "the dialler waits
    /// for its HELLO until the set-up deadline (30 s), not the silence
    /// limit"); an accepted one is not.
    pub fn is_patient(&self, dialled: bool, awaiting_hello: bool, now: Instant) -> bool {
        dialled && awaiting_hello && !self.done && now < self.deadline
    }

    /// At the deadline of a set-up that did not complete (the set-up
    /// deadline: "only then fails: with H1611 if some peer failed
    /// authentication, else with H1616 (set-up timed out)", protocol §5.3):
    /// H1616 names the missing ranks. Reported once.
    pub fn poll_deadline(&mut self, now: Instant) -> Option<Error> {
        if self.done || now < self.deadline {
            return None;
        }
        self.done = true;
        Some(self.auth_error.take().unwrap_or(Error::SetupTimeout {
            after_ms: self.window.as_millis() as u64,
            missing: self.missing(),
        }))
    }

    /// The ranks without an authenticated connection.
    pub fn missing(&self) -> Vec<u32> {
        (0..self.authenticated.len() as u32)
            .filter(|&r| !self.is_authenticated(r))
            .collect()
    }

    /// When a `poll_*` has something to do next.
    pub fn next_timeout(&self) -> Option<Instant> {
        if self.done {
            return None;
        }
        let dial = self.redial.iter().flatten().min().copied();
        Some(dial.map_or(self.deadline, |d| d.min(self.deadline)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_wire::FrameType;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    fn setup(rank: u32, size: u32, t0: Instant) -> Setup {
        Setup::new(
            rank,
            size,
            Duration::from_secs(30),
            Duration::from_millis(100),
            t0,
        )
    }

    #[test]
    fn dials_higher_ranks_and_retries_every_100_ms() {
        let t0 = Instant::now();
        let mut s = setup(1, 4, t0);
        assert_eq!(s.poll_dials(t0), vec![2, 3]);
        assert_eq!(s.poll_dials(t0), Vec::<u32>::new(), "under way");
        s.handle_dial_failed(2, at(t0, 5));
        assert_eq!(s.next_timeout(), Some(at(t0, 105)));
        assert!(s.poll_dials(at(t0, 104)).is_empty());
        assert_eq!(s.poll_dials(at(t0, 105)), vec![2]);
        // A dialled socket that failed TLS is dialled again.
        s.handle_dropped(Some(3), None, None, at(t0, 200));
        assert_eq!(s.poll_dials(at(t0, 300)), vec![3]);
        // No dial after the deadline.
        s.handle_dial_failed(3, at(t0, 29_950));
        assert!(s.poll_dials(at(t0, 30_050)).is_empty());
    }

    #[test]
    fn a_replacement_dials_every_member_but_the_lower_replacements() {
        let t0 = Instant::now();
        let w = Duration::from_secs(30);
        let r = Duration::from_millis(100);
        // Rank 2 of 6 replaced with rank 1 (lower, dials it) and rank 4
        // (higher, dialled); rank 5 was shrunk away.
        let mut s = Setup::replacement(2, &[1, 2, 2, 1, 2, 0], &[1, 2, 4], w, r, t0);
        assert_eq!(s.poll_dials(t0), vec![0, 3, 4]);
        let job = JobId([0xab; 16]);
        let cn = |r: u32| format!("sperli-{}-{r}", job.to_hex());
        assert_eq!(s.accepted_rank(&job, &cn(1)), Ok(1));
        assert!(
            s.accepted_rank(&job, &cn(0)).is_err(),
            "a survivor is dialled"
        );
        assert!(s.accepted_rank(&job, &cn(5)).is_err(), "not a member");
        assert_eq!(s.missing(), vec![0, 1, 3, 4]);
        for p in [0, 1, 3] {
            assert!(s.handle_authenticated(p));
        }
        assert!(!s.is_done());
        assert!(s.handle_authenticated(4));
        assert!(s.is_done());
    }

    #[test]
    fn completes_when_every_peer_authenticated() {
        let t0 = Instant::now();
        let mut s = setup(1, 3, t0);
        assert!(!s.is_done());
        assert!(s.handle_authenticated(0));
        assert_eq!(s.missing(), vec![2]);
        assert!(s.handle_authenticated(2));
        assert!(s.is_done());
        assert_eq!(s.next_timeout(), None);
        assert_eq!(s.poll_deadline(at(t0, 40_000)), None);
        assert!(setup(0, 1, t0).is_done(), "size 1: nothing to set up");
    }

    #[test]
    fn a_second_connection_for_a_rank_does_not_count() {
        let t0 = Instant::now();
        let mut s = setup(2, 3, t0);
        assert!(s.handle_authenticated(0));
        assert!(!s.handle_authenticated(0));
        assert!(!s.handle_authenticated(7), "no such rank");
    }

    #[test]
    fn accepted_connections_must_be_lower_ranks_not_yet_connected() {
        let t0 = Instant::now();
        let job = JobId([0xab; 16]);
        let mut s = setup(2, 4, t0);
        let cn = |r: u32| format!("sperli-{}-{r}", job.to_hex());
        assert_eq!(s.accepted_rank(&job, &cn(1)), Ok(1));
        s.handle_authenticated(1);
        for bad in [cn(1), cn(3), cn(2), "sperli-x-0".to_string()] {
            match s.accepted_rank(&job, &bad) {
                Err(Error::Authentication {
                    error: AuthError::Subject { got, .. },
                    ..
                }) => assert_eq!(got, bad),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_deadline_says_h1611_after_an_auth_failure_else_h1616() {
        let t0 = Instant::now();
        let mut s = setup(0, 3, t0);
        s.handle_authenticated(1);
        assert_eq!(s.poll_deadline(at(t0, 29_999)), None);
        let e = s.poll_deadline(at(t0, 30_000)).unwrap();
        assert_eq!(
            e,
            Error::SetupTimeout {
                after_ms: 30_000,
                missing: vec![2]
            }
        );
        assert_eq!(s.poll_deadline(at(t0, 30_001)), None, "once");

        let mut s = setup(0, 2, t0);
        // A socket error is no authentication failure.
        s.handle_dropped(Some(1), None, None, t0);
        // A first frame that is not HELLO is.
        let not_hello = FrameError::Unexpected {
            frame_type: FrameType::Data,
            when: "before HELLO",
        };
        s.handle_dropped(Some(1), None, Some(not_hello.into()), t0);
        let e = s.poll_deadline(at(t0, 30_000)).unwrap();
        assert_eq!(
            e,
            Error::Authentication {
                peer: Some(1),
                error: AuthError::NotHello {
                    got: FrameType::Data
                }
            }
        );
        assert_eq!(e.h_code().map(|c| c.number()), Some(1611));
    }

    #[test]
    fn a_dialled_peer_that_finished_tls_is_waited_for_until_the_deadline() {
        let t0 = Instant::now();
        let mut s = setup(0, 2, t0);
        assert!(s.is_patient(true, true, at(t0, 6_000)));
        assert!(!s.is_patient(false, true, at(t0, 6_000)), "accepted");
        assert!(!s.is_patient(true, false, at(t0, 6_000)), "open already");
        assert!(!s.is_patient(true, true, at(t0, 30_000)), "deadline");
        s.handle_authenticated(1);
        assert!(!s.is_patient(true, true, at(t0, 6_000)), "set-up over");
    }
}
