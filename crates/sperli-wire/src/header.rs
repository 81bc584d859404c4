//! The 52-byte frame header and the receiver's check (protocol §6).
//!
//! [`check`] takes the 52 header bytes and what the receiver expects and
//! answers accept, discard (older incarnation) or reject, before any payload
//! byte is read or allocated.

use crate::codec::{PutLe, Reader};
use crate::error::FrameError;
use crate::frame_type::FrameType;
use crate::ids::JobId;
use crate::limits::{
    commit_file_len, FEATURE_COMMUNICATORS, HEADER_LEN, MAX_ABORT_MESSAGE, MAX_CKPT_CHUNK,
    MAX_COMMUNICATOR_ID, MAX_PAYLOAD, MAX_USER_TAG,
};
use crate::recovery::header::{check_membership_epoch, EpochVerdict};
use crate::recovery::FEATURE_MEMBERSHIP;

/// A header with every field as it is on the wire, valid or not. Used to
/// encode any header (including the negative vectors) and as the first step
/// of [`check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawHeader {
    /// Payload bytes.
    pub length: u32,
    /// Type code.
    pub frame_type: u8,
    /// Flags (0 in v1).
    pub flags: u8,
    /// Service (0 in v1).
    pub service: u16,
    /// Membership epoch (0 in v1).
    pub membership_epoch: u32,
    /// Job id.
    pub job_id: JobId,
    /// Source rank.
    pub source: u32,
    /// Target rank.
    pub target: u32,
    /// Sender's incarnation.
    pub incarnation: u32,
    /// Tag (DATA; COLLECTIVE with feature bit 2: the communicator id; 0
    /// for every other type).
    pub tag: u32,
    /// Checkpoint epoch (checkpoint and RESUME frames; 0 otherwise).
    pub epoch: u64,
}

impl RawHeader {
    /// The 52 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut v = Vec::with_capacity(HEADER_LEN);
        v.put_u32(self.length);
        v.push(self.frame_type);
        v.push(self.flags);
        v.put_u16(self.service);
        v.put_u32(self.membership_epoch);
        v.extend_from_slice(&self.job_id.0);
        v.put_u32(self.source);
        v.put_u32(self.target);
        v.put_u32(self.incarnation);
        v.put_u32(self.tag);
        v.put_u64(self.epoch);
        let mut out = [0u8; HEADER_LEN];
        out.copy_from_slice(&v);
        out
    }

    /// Reads the fields of 52 bytes (infallible: every bit pattern is a raw header).
    pub fn from_bytes(bytes: &[u8; HEADER_LEN]) -> Self {
        // A 52-byte reader cannot run short of these 52 bytes.
        fn read(r: &mut Reader<'_>) -> Result<RawHeader, crate::error::DecodeError> {
            Ok(RawHeader {
                length: r.u32("length")?,
                frame_type: r.u8("type")?,
                flags: r.u8("flags")?,
                service: r.u16("service")?,
                membership_epoch: r.u32("membership_epoch")?,
                job_id: JobId(r.array("job_id")?),
                source: r.u32("source_rank")?,
                target: r.u32("target_rank")?,
                incarnation: r.u32("incarnation")?,
                tag: r.u32("tag")?,
                epoch: r.u64("epoch")?,
            })
        }
        read(&mut Reader::new(bytes)).unwrap_or_default()
    }
}

/// A header that passed [`check`]: flags and service are 0, and so is the
/// membership epoch unless the job has HELLO feature bit 5 (protocol §18.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload bytes.
    pub length: u32,
    /// Frame type.
    pub frame_type: FrameType,
    /// The sender's membership epoch (protocol §18.2); 0 in v1.
    pub membership_epoch: u32,
    /// Job id.
    pub job_id: JobId,
    /// Source rank.
    pub source: u32,
    /// Target rank.
    pub target: u32,
    /// Sender's incarnation.
    pub incarnation: u32,
    /// Tag.
    pub tag: u32,
    /// Checkpoint epoch.
    pub epoch: u64,
}

impl FrameHeader {
    /// A header of `frame_type` from `source` to `target`, tag 0, epoch 0, length 0.
    pub fn new(
        frame_type: FrameType,
        job_id: JobId,
        source: u32,
        target: u32,
        incarnation: u32,
    ) -> Self {
        Self {
            length: 0,
            frame_type,
            membership_epoch: 0,
            job_id,
            source,
            target,
            incarnation,
            tag: 0,
            epoch: 0,
        }
    }

    /// The same header with another tag.
    pub fn with_tag(mut self, tag: u32) -> Self {
        self.tag = tag;
        self
    }

    /// The same header with another epoch.
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// The same header with another membership epoch (protocol §18.2).
    pub fn with_membership_epoch(mut self, membership_epoch: u32) -> Self {
        self.membership_epoch = membership_epoch;
        self
    }

    /// The wire fields.
    pub fn to_raw(&self) -> RawHeader {
        RawHeader {
            length: self.length,
            frame_type: self.frame_type.code(),
            flags: 0,
            service: 0,
            membership_epoch: self.membership_epoch,
            job_id: self.job_id,
            source: self.source,
            target: self.target,
            incarnation: self.incarnation,
            tag: self.tag,
            epoch: self.epoch,
        }
    }

    /// The 52 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        self.to_raw().to_bytes()
    }
}

/// What the receiver of a connection expects (protocol §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receiver {
    /// This job.
    pub job_id: JobId,
    /// The receiving rank.
    pub own_rank: u32,
    /// The authenticated peer on this connection.
    pub peer_rank: u32,
    /// The receiver's incarnation.
    pub incarnation: u32,
    /// The job size (CKPT_COMMIT's payload length depends on it).
    pub size: u32,
    /// The HELLO feature bits the job negotiated, as the receiver knows
    /// them (protocol §6.2 checks 12 and 13, §7.1.1): bit 2 lets a
    /// COLLECTIVE frame carry a communicator id in its tag (§15.2), bit 1
    /// the pipelined payloads (§14.2), bit 5 the membership epochs and
    /// type 12 (§18.2). [`crate::limits::FEATURE_V1_CORE`] for a v1 job.
    pub features: u64,
    /// The receiver's current membership epoch (protocol §18.2), judged
    /// only with bit 5 in `features` (0 otherwise). With bit 5,
    /// `incarnation` is `inc[peer_rank]` of that membership.
    pub membership_epoch: u32,
}

/// The answer of [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Read `length` payload bytes and hand the frame on.
    Accept(FrameHeader),
    /// Older incarnation: read `length` bytes and drop them; nothing else happens.
    Discard {
        /// Payload bytes to read and drop.
        length: u32,
    },
    /// Reject (H1610): close, ABORT reason 7 to all peers, end the job step.
    Reject(FrameError),
}

/// The allowed payload lengths of a type, `(min, max)`: the table of
/// protocol §6.3, one row per arm.
pub fn payload_length_rule(t: FrameType, size: u32) -> (u32, u32) {
    let commit = u32::try_from(commit_file_len(size)).unwrap_or(u32::MAX);
    match t {
        // "≥ 14 (and exactly 14 + token_len, checked when decoding)"
        FrameType::Hello => (14, MAX_PAYLOAD),
        // "0..=16777216"
        FrameType::Data => (0, MAX_PAYLOAD),
        // "≥ 16"
        FrameType::Collective => (16, MAX_PAYLOAD),
        // "= 8"
        FrameType::Heartbeat => (8, 8),
        // "8..=1032"
        FrameType::Abort => (8, 8 + MAX_ABORT_MESSAGE as u32),
        // "= 8"
        FrameType::CkptBegin => (8, 8),
        // "24..=24 + 1048576"
        FrameType::CkptData => (24, 24 + MAX_CKPT_CHUNK as u32),
        // "= 32"
        FrameType::CkptAck => (32, 32),
        // "= 2526 + 32·size (the receiver's size)"
        FrameType::CkptCommit => (commit, commit),
        // "≥ 8"
        FrameType::Resume => (8, MAX_PAYLOAD),
        // "= 0"
        FrameType::Bye => (0, 0),
        // Protocol §18.2: "type 12 has ... a payload length of at least 8".
        FrameType::Recover => (8, MAX_PAYLOAD),
    }
}

/// Judges a header in the order of protocol §6.2: "The receiver reads the
/// 52-byte header and checks it before it reads or allocates any payload
/// byte, in exactly this order. The first failing check decides": length,
/// type, flags, service, membership epoch, job id, source, target,
/// incarnation, epoch, payload length, tag. Check 13 (the payload) is the
/// decoder's, after the payload is read.
///
/// ```
/// use sperli_wire::header::{check, FrameHeader, Receiver, Verdict};
/// use sperli_wire::{FrameType, JobId};
/// let job = JobId([1; 16]);
/// let rx = Receiver { job_id: job, own_rank: 1, peer_rank: 0, incarnation: 1, size: 2,
///     features: 1, membership_epoch: 0 };
/// let h = FrameHeader::new(FrameType::Data, job, 0, 1, 1).with_tag(5);
/// assert!(matches!(check(&h.to_bytes(), &rx), Verdict::Accept(_)));
/// let old = FrameHeader { length: 9, ..FrameHeader::new(FrameType::Data, job, 0, 1, 0) };
/// assert_eq!(check(&old.to_bytes(), &rx), Verdict::Discard { length: 9 });
/// ```
pub fn check(bytes: &[u8; HEADER_LEN], rx: &Receiver) -> Verdict {
    let h = RawHeader::from_bytes(bytes);
    match judge(&h, rx) {
        Ok(Some(header)) => Verdict::Accept(header),
        Ok(None) => Verdict::Discard { length: h.length },
        Err(e) => Verdict::Reject(e),
    }
}

fn judge(h: &RawHeader, rx: &Receiver) -> Result<Option<FrameHeader>, FrameError> {
    // Check 1, length: fails when "length > 16777216" (protocol §6.2).
    if h.length > MAX_PAYLOAD {
        return Err(FrameError::TooLong {
            max: MAX_PAYLOAD,
            got: h.length,
        });
    }
    // Check 2, type: fails when "type = 0 or type > 11" (protocol §6.2);
    // with feature bit 5 "type = 0 or type > 12" (protocol §18.2).
    let frame_type = FrameType::from_code_with(h.frame_type, rx.features)
        .ok_or(FrameError::UnknownType { got: h.frame_type })?;
    let bit5 = rx.features & FEATURE_MEMBERSHIP != 0;
    // Checks 3-5: fails when "flags ≠ 0", "service ≠ 0", "membership_epoch
    // ≠ 0" (protocol §6.2; reserved for later versions, protocol §11).
    // With bit 5 check 5 is protocol §18.2's.
    for (field, got) in [
        ("flags", u64::from(h.flags)),
        ("service", u64::from(h.service)),
        ("membership_epoch", u64::from(h.membership_epoch)),
    ] {
        if got != 0 && !(bit5 && field == "membership_epoch") {
            return Err(FrameError::ReservedField { field, got });
        }
    }
    if bit5 {
        match check_membership_epoch(h.frame_type, h.membership_epoch, rx.membership_epoch) {
            Ok(EpochVerdict::Discard) => return Ok(None),
            Ok(EpochVerdict::Pass | EpochVerdict::Older) => {}
            Err(_) => {
                return Err(FrameError::MembershipEpoch {
                    current: rx.membership_epoch,
                    got: h.membership_epoch,
                })
            }
        }
    }
    // Check 6, job: fails when "job_id ≠ the receiver's job id" (protocol §6.2).
    if h.job_id != rx.job_id {
        return Err(FrameError::WrongJob {
            expected: rx.job_id,
            got: h.job_id,
        });
    }
    // Check 7, source: fails when "source_rank ≠ the authenticated peer's
    // rank" (protocol §6.2).
    if h.source != rx.peer_rank {
        return Err(FrameError::WrongSource {
            expected: rx.peer_rank,
            got: h.source,
        });
    }
    // Check 8, target: fails when "target_rank ≠ the receiver's rank"
    // (protocol §6.2).
    if h.target != rx.own_rank {
        return Err(FrameError::WrongTarget {
            expected: rx.own_rank,
            got: h.target,
        });
    }
    // Check 9, incarnation: "lower than the receiver's: discard (read
    // `length` bytes, drop them, stop here); higher: reject" (protocol §6.2).
    if h.incarnation < rx.incarnation {
        return Ok(None);
    }
    if h.incarnation > rx.incarnation {
        return Err(FrameError::NewerIncarnation {
            own: rx.incarnation,
            got: h.incarnation,
        });
    }
    // Check 10, epoch: "CKPT_BEGIN, CKPT_DATA, CKPT_ACK, CKPT_COMMIT with
    // epoch 0; HELLO, DATA, COLLECTIVE, HEARTBEAT, ABORT, BYE with epoch ≠ 0
    // (RESUME: any epoch)" (protocol §6.2).
    if !frame_type.epoch_allowed(h.epoch) {
        return Err(FrameError::Epoch {
            frame_type,
            got: h.epoch,
        });
    }
    // Check 11, payload_length: fails when "length outside the type's rule
    // (6.3)" (protocol §6.2).
    let (min, max) = payload_length_rule(frame_type, rx.size);
    if h.length < min || h.length > max {
        return Err(FrameError::PayloadLength {
            frame_type,
            min,
            max,
            got: h.length,
        });
    }
    // Check 12, tag: fails when "DATA with tag ≥ 2147483648; any other type
    // with tag ≠ 0" (protocol §6.2). "The two tag checks come last, after the
    // incarnation, so a frame of an older incarnation is discarded without
    // its tag (or epoch, or payload length) being judged." With HELLO
    // feature bit 2 a COLLECTIVE tag is the communicator id (protocol §15.2).
    let communicators = rx.features & FEATURE_COMMUNICATORS != 0;
    if frame_type == FrameType::Data {
        if h.tag > MAX_USER_TAG {
            return Err(FrameError::ReservedTag { got: h.tag });
        }
    } else if frame_type == FrameType::Collective && communicators {
        // Protocol §15.2: with bit 2 the tag is the communicator id.
        if h.tag > MAX_COMMUNICATOR_ID {
            return Err(FrameError::ReservedTag { got: h.tag });
        }
    } else if h.tag != 0 {
        return Err(FrameError::NonZeroTag {
            frame_type,
            got: h.tag,
        });
    }
    Ok(Some(FrameHeader {
        length: h.length,
        frame_type,
        membership_epoch: h.membership_epoch,
        job_id: h.job_id,
        source: h.source,
        target: h.target,
        incarnation: h.incarnation,
        tag: h.tag,
        epoch: h.epoch,
    }))
}

/// The short name of the check a rejection comes from, as the vectors file
/// writes it (`length`, `type`, ..., `tag`, `payload`).
pub fn check_name(e: &FrameError) -> &'static str {
    match e {
        FrameError::TooLong { .. } => "length",
        FrameError::UnknownType { .. } => "type",
        FrameError::ReservedField { field, .. } => field,
        FrameError::MembershipEpoch { .. } => "membership_epoch",
        FrameError::WrongJob { .. } => "job",
        FrameError::WrongSource { .. } => "source",
        FrameError::WrongTarget { .. } => "target",
        FrameError::NewerIncarnation { .. } => "incarnation",
        FrameError::Epoch { .. } => "epoch",
        FrameError::PayloadLength { .. } => "payload_length",
        FrameError::ReservedTag { .. } | FrameError::NonZeroTag { .. } => "tag",
        _ => "payload",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const JOB: JobId = JobId([9; 16]);
    const RX: Receiver = Receiver {
        job_id: JOB,
        own_rank: 2,
        peer_rank: 1,
        incarnation: 3,
        size: 4,
        features: crate::limits::FEATURE_V1_CORE,
        membership_epoch: 0,
    };

    fn raw(t: FrameType) -> RawHeader {
        FrameHeader::new(t, JOB, 1, 2, 3).to_raw()
    }

    fn verdict(h: RawHeader) -> Verdict {
        check(&h.to_bytes(), &RX)
    }

    fn rejected(h: RawHeader) -> &'static str {
        match verdict(h) {
            Verdict::Reject(e) => check_name(&e),
            v => panic!("not rejected: {v:?}"),
        }
    }

    #[test]
    fn raw_round_trip() {
        let h = RawHeader {
            length: 1,
            frame_type: 2,
            flags: 3,
            service: 4,
            membership_epoch: 5,
            job_id: JOB,
            source: 6,
            target: 7,
            incarnation: 8,
            tag: 9,
            epoch: 10,
        };
        assert_eq!(RawHeader::from_bytes(&h.to_bytes()), h);
    }

    #[test]
    fn limits() {
        let mut h = raw(FrameType::Data);
        h.length = MAX_PAYLOAD;
        assert!(matches!(verdict(h), Verdict::Accept(_)));
        h.length = MAX_PAYLOAD + 1;
        assert_eq!(
            verdict(h),
            Verdict::Reject(FrameError::TooLong {
                max: 16777216,
                got: 16777217
            })
        );
        h = raw(FrameType::Data);
        h.tag = MAX_USER_TAG;
        assert!(matches!(verdict(h), Verdict::Accept(_)));
        h.tag = MAX_USER_TAG + 1;
        assert_eq!(rejected(h), "tag");
    }

    #[test]
    fn order_of_checks() {
        // Everything wrong at once: the length is named first.
        let all_wrong = RawHeader {
            length: u32::MAX,
            frame_type: 0,
            flags: 1,
            service: 1,
            membership_epoch: 1,
            job_id: JobId([0; 16]),
            source: 9,
            target: 9,
            incarnation: 9,
            tag: u32::MAX,
            epoch: 5,
        };
        let mut h = all_wrong;
        let expected = [
            "length",
            "type",
            "flags",
            "service",
            "membership_epoch",
            "job",
            "source",
            "target",
            "incarnation",
            "epoch",
            "tag",
        ];
        let fixes: [fn(&mut RawHeader); 11] = [
            |h| h.length = 0,
            |h| h.frame_type = FrameType::Data.code(),
            |h| h.flags = 0,
            |h| h.service = 0,
            |h| h.membership_epoch = 0,
            |h| h.job_id = JOB,
            |h| h.source = 1,
            |h| h.target = 2,
            |h| h.incarnation = 3,
            |h| h.epoch = 0,
            |h| h.tag = 0,
        ];
        for (name, fix) in expected.iter().zip(fixes) {
            assert_eq!(rejected(h), *name);
            fix(&mut h);
        }
        assert!(matches!(verdict(h), Verdict::Accept(_)));
    }

    #[test]
    fn a_collective_tag_is_a_communicator_id_only_with_bit_2() {
        use crate::limits::{FEATURES_IMPLEMENTED, FEATURE_PIPELINED};
        let mut h = raw(FrameType::Collective);
        h.length = 16;
        h.tag = 5;
        for f in [1, 1 | FEATURE_PIPELINED] {
            let rx = Receiver { features: f, ..RX };
            assert!(matches!(
                check(&h.to_bytes(), &rx),
                Verdict::Reject(FrameError::NonZeroTag { .. })
            ));
        }
        let rx = Receiver {
            // Bit 5 is not the point here (its own test is above).
            features: FEATURES_IMPLEMENTED & !FEATURE_MEMBERSHIP,
            membership_epoch: 0,
            ..RX
        };
        assert!(matches!(check(&h.to_bytes(), &rx), Verdict::Accept(a) if a.tag == 5));
        h.tag = MAX_COMMUNICATOR_ID + 1;
        match check(&h.to_bytes(), &rx) {
            Verdict::Reject(e) => assert_eq!(check_name(&e), "tag"),
            v => panic!("{v:?}"),
        }
        // DATA and the other types are unchanged by the bit.
        let mut b = raw(FrameType::Bye);
        b.tag = 5;
        assert!(matches!(
            check(&b.to_bytes(), &rx),
            Verdict::Reject(FrameError::NonZeroTag { .. })
        ));
    }

    #[test]
    fn membership_epochs_only_with_bit_5() {
        // Protocol §18.2: type 12 and a membership epoch only with bit 5.
        let bit5 = Receiver {
            features: crate::limits::FEATURE_V1_CORE | FEATURE_MEMBERSHIP,
            membership_epoch: 3,
            ..RX
        };
        let judge = |t: u8, m: u32, rx: &Receiver| {
            let mut h = raw(FrameType::Data);
            h.frame_type = t;
            h.membership_epoch = m;
            h.length = 8;
            check(&h.to_bytes(), rx)
        };
        assert!(matches!(
            judge(12, 3, &RX),
            Verdict::Reject(FrameError::UnknownType { got: 12 })
        ));
        assert!(matches!(
            judge(2, 1, &RX),
            Verdict::Reject(FrameError::ReservedField { .. })
        ));
        match judge(12, 3, &bit5) {
            Verdict::Accept(h) => {
                assert_eq!((h.frame_type, h.membership_epoch), (FrameType::Recover, 3))
            }
            v => panic!("{v:?}"),
        }
        // An older RECOVER is read (its payload is judged); an older DATA dropped.
        assert!(matches!(judge(12, 2, &bit5), Verdict::Accept(_)));
        assert_eq!(judge(2, 2, &bit5), Verdict::Discard { length: 8 });
        for (t, m) in [(2, 4), (2, 0), (12, 0), (13, 3)] {
            assert!(matches!(judge(t, m, &bit5), Verdict::Reject(_)), "{t} {m}");
        }
        // HEARTBEAT: any epoch up to the current one, 0 included.
        let hb = |m: u32| {
            let mut h = raw(FrameType::Heartbeat);
            h.membership_epoch = m;
            h.length = 8;
            check(&h.to_bytes(), &bit5)
        };
        assert!(matches!(hb(0), Verdict::Accept(_)));
        assert!(matches!(hb(3), Verdict::Accept(_)));
        assert!(matches!(
            hb(4),
            Verdict::Reject(FrameError::MembershipEpoch { current: 3, got: 4 })
        ));
    }

    #[test]
    fn older_incarnation_discarded_before_epoch_length_and_tag() {
        let mut h = raw(FrameType::Collective);
        h.incarnation = 2;
        h.tag = 77;
        h.epoch = 5;
        h.length = 3;
        assert_eq!(verdict(h), Verdict::Discard { length: 3 });
        h.incarnation = 4;
        assert_eq!(rejected(h), "incarnation");
    }

    #[test]
    fn payload_lengths() {
        for t in FrameType::ALL {
            let (min, max) = payload_length_rule(t, RX.size);
            let mut h = raw(t);
            if !t.epoch_allowed(0) {
                h.epoch = 1;
            }
            h.length = min;
            assert!(matches!(verdict(h), Verdict::Accept(_)), "{t} min");
            h.length = max;
            assert!(matches!(verdict(h), Verdict::Accept(_)), "{t} max");
            if min > 0 {
                h.length = min - 1;
                assert_eq!(rejected(h), "payload_length", "{t}");
            }
            if max < MAX_PAYLOAD {
                h.length = max + 1;
                assert_eq!(rejected(h), "payload_length", "{t}");
            }
        }
        assert_eq!(payload_length_rule(FrameType::CkptCommit, 4), (2654, 2654));
    }

    #[test]
    fn epoch_rule() {
        let mut h = raw(FrameType::CkptBegin);
        h.length = 8;
        assert_eq!(rejected(h), "epoch");
        h.epoch = 1;
        assert!(matches!(verdict(h), Verdict::Accept(_)));
        let mut r = raw(FrameType::Resume);
        r.length = 8;
        assert!(matches!(verdict(r), Verdict::Accept(_)));
        let mut d = raw(FrameType::Data);
        d.epoch = 1;
        assert_eq!(rejected(d), "epoch");
    }

    proptest! {
        #[test]
        fn any_header_gets_a_verdict(bytes in any::<[u8; 52]>()) {
            let _ = check(&bytes, &RX);
            prop_assert_eq!(RawHeader::from_bytes(&bytes).to_bytes(), bytes);
        }
    }
}
