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
}

impl<'a> Payload<'a> {
    /// Decodes the payload of a frame of type `t` (whose header passed
    /// [`crate::header::check`]). Any failure is H1610.
    ///
    /// A COLLECTIVE payload is judged here by the rules of every extension
    /// this implementation knows ([`FEATURES_IMPLEMENTED`]): it must be a
    /// frame some job could accept. Whether *this* job accepts it depends
    /// on the features the job negotiated (protocol §7.1.1, §14.1: a
    /// pipelined frame in a job without bit 1 is H1610); the collective
    /// layer judges that when it takes the frame, with
    /// [`crate::pipeline::CollectivePayload::decode`].
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
        }
    }
}
