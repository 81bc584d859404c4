//! Every frame payload, by type (protocol §7).

use crate::abort::Abort;
use crate::bye::Bye;
use crate::ckpt_ack::CkptAck;
use crate::ckpt_begin::CkptBegin;
use crate::ckpt_data::CkptData;
use crate::codec::Codec;
use crate::collective::Collective;
use crate::commit_file::CommitFile;
use crate::data::Data;
use crate::error::FrameError;
use crate::frame_type::FrameType;
use crate::heartbeat::Heartbeat;
use crate::hello::Hello;
use crate::limits::{COLLECTIVE_HEADER_LEN, FEATURES_IMPLEMENTED};
use crate::pipeline::CollectivePayload;
use crate::resume::Resume;

/// A decoded payload of any type; borrows from the frame bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload<'a> {
    /// HELLO (1).
    Hello(Hello<'a>),
    /// DATA (2).
    Data(Data<'a>),
    /// COLLECTIVE (3).
    Collective(Collective<'a>),
    /// HEARTBEAT (4).
    Heartbeat(Heartbeat),
    /// ABORT (5).
    Abort(Abort<'a>),
    /// CKPT_BEGIN (6).
    CkptBegin(CkptBegin),
    /// CKPT_DATA (7).
    CkptData(CkptData<'a>),
    /// CKPT_ACK (8).
    CkptAck(CkptAck),
    /// CKPT_COMMIT (9): the COMMIT file.
    CkptCommit(CommitFile<'a>),
    /// RESUME (10).
    Resume(Resume<'a>),
    /// BYE (11).
    Bye(Bye),
    /// RECOVER (12, feature bit 5): the payload's bytes, which the
    /// receiver decodes with [`crate::recovery::RecoverPayload::decode`]
    /// (its checks need the job's size and the sender, protocol §18.5).
    Recover(&'a [u8]),
}

impl<'a> Payload<'a> {
    /// Decodes the payload of a frame of type `t` (whose header passed
    /// [`crate::header::check`]) as a receiver in a job that negotiated
    /// the HELLO `features` judges it (protocol §6.2 check 13, §7.1.1): a
    /// COLLECTIVE payload by the rules of the extensions in `features`
    /// (the pipelined phases and operations of §14.2 only with bit 1).
    /// Any failure is H1610. This is what a frame reader calls when a
    /// frame arrives.
    ///
    /// ```
    /// use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
    /// use sperli_wire::limits::{FEATURE_PIPELINED, FEATURE_V1_CORE};
    /// use sperli_wire::payload::Payload;
    /// use sperli_wire::pipeline::{encode_open, Open};
    /// use sperli_wire::FrameType;
    /// let h = CollectiveHeader { operation: Operation::Allreduce, element_type: 6,
    ///     reduction: 1, phase: Phase::Open, root: 0, sequence: 1 };
    /// let mut p = Vec::new();
    /// encode_open(&h, Open { total: 8, fanout: 1 }, &mut p);
    /// let with_bit_1 = FEATURE_V1_CORE | FEATURE_PIPELINED;
    /// assert!(Payload::decode_with(FrameType::Collective, &p, with_bit_1).is_ok());
    /// assert!(Payload::decode_with(FrameType::Collective, &p, FEATURE_V1_CORE).is_err());
    /// ```
    pub fn decode_with(t: FrameType, bytes: &'a [u8], features: u64) -> Result<Self, FrameError> {
        if t == FrameType::Collective {
            let c = CollectivePayload::decode(bytes, features).map_err(|error| {
                FrameError::Payload {
                    frame_type: t,
                    error,
                }
            })?;
            return Ok(Payload::Collective(Collective {
                header: c.header,
                data: &bytes[COLLECTIVE_HEADER_LEN..],
            }));
        }
        Self::decode(t, bytes)
    }

    /// Decodes the payload of a frame of type `t` by the rules of every
    /// extension this implementation knows ([`FEATURES_IMPLEMENTED`]): a
    /// payload some job could accept. A receiver judges an arriving frame
    /// with [`Payload::decode_with`] and its job's features instead; this
    /// form re-reads a payload that was judged already (it cannot fail
    /// then) and suits tools that know no job.
    pub fn decode(t: FrameType, bytes: &'a [u8]) -> Result<Self, FrameError> {
        let wrap = |error| FrameError::Payload {
            frame_type: t,
            error,
        };
        Ok(match t {
            FrameType::Hello => Payload::Hello(Hello::decode(bytes).map_err(wrap)?),
            FrameType::Data => Payload::Data(Data::decode(bytes).map_err(wrap)?),
            FrameType::Collective => {
                let c = CollectivePayload::decode(bytes, FEATURES_IMPLEMENTED).map_err(wrap)?;
                Payload::Collective(Collective {
                    header: c.header,
                    data: &bytes[COLLECTIVE_HEADER_LEN..],
                })
            }
            FrameType::Heartbeat => Payload::Heartbeat(Heartbeat::decode(bytes).map_err(wrap)?),
            FrameType::Abort => Payload::Abort(Abort::decode(bytes).map_err(wrap)?),
            FrameType::CkptBegin => Payload::CkptBegin(CkptBegin::decode(bytes).map_err(wrap)?),
            FrameType::CkptData => Payload::CkptData(CkptData::decode(bytes).map_err(wrap)?),
            FrameType::CkptAck => Payload::CkptAck(CkptAck::decode(bytes).map_err(wrap)?),
            FrameType::CkptCommit => Payload::CkptCommit(CommitFile::decode(bytes).map_err(wrap)?),
            FrameType::Resume => Payload::Resume(Resume::decode(bytes).map_err(wrap)?),
            FrameType::Bye => Payload::Bye(Bye::decode(bytes).map_err(wrap)?),
            FrameType::Recover => Payload::Recover(bytes),
        })
    }

    /// The frame type that carries this payload.
    pub fn frame_type(&self) -> FrameType {
        match self {
            Payload::Hello(_) => FrameType::Hello,
            Payload::Data(_) => FrameType::Data,
            Payload::Collective(_) => FrameType::Collective,
            Payload::Heartbeat(_) => FrameType::Heartbeat,
            Payload::Abort(_) => FrameType::Abort,
            Payload::CkptBegin(_) => FrameType::CkptBegin,
            Payload::CkptData(_) => FrameType::CkptData,
            Payload::CkptAck(_) => FrameType::CkptAck,
            Payload::CkptCommit(_) => FrameType::CkptCommit,
            Payload::Resume(_) => FrameType::Resume,
            Payload::Bye(_) => FrameType::Bye,
            Payload::Recover(_) => FrameType::Recover,
        }
    }

    /// Appends the payload's encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Payload::Hello(p) => p.encode(out),
            Payload::Data(p) => p.encode(out),
            Payload::Collective(p) => p.encode(out),
            Payload::Heartbeat(p) => p.encode(out),
            Payload::Abort(p) => p.encode(out),
            Payload::CkptBegin(p) => p.encode(out),
            Payload::CkptData(p) => p.encode(out),
            Payload::CkptAck(p) => p.encode(out),
            Payload::CkptCommit(p) => p.encode(out),
            Payload::Resume(p) => p.encode(out),
            Payload::Bye(p) => p.encode(out),
            Payload::Recover(p) => out.extend_from_slice(p),
        }
    }
}
