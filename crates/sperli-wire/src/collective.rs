//! COLLECTIVE (3): the 16-byte collective header, then data (layouts §5).

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;

/// Collective operations (layouts §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Operation {
    /// 1: barrier (rooted at 0).
    Barrier = 1,
    /// 2: broadcast from the root.
    Bcast = 2,
    /// 3: reduce to the root.
    Reduce = 3,
    /// 4: allreduce (rooted at 0).
    Allreduce = 4,
    /// 5: gather to the root.
    Gather = 5,
    /// 6: scatter from the root.
    Scatter = 6,
}

impl Operation {
    /// The operation for a code 1..=6.
    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            1 => Operation::Barrier,
            2 => Operation::Bcast,
            3 => Operation::Reduce,
            4 => Operation::Allreduce,
            5 => Operation::Gather,
            6 => Operation::Scatter,
            _ => return None,
        })
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Whether the header carries an element type and a reduction.
    pub fn reduces(self) -> bool {
        matches!(self, Operation::Reduce | Operation::Allreduce)
    }
}

/// Phase: toward the root (0) or from the root (1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Phase {
    /// 0: toward the root.
    ToRoot = 0,
    /// 1: from the root.
    FromRoot = 1,
}

/// The 16-byte collective header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveHeader {
    /// The operation.
    pub operation: Operation,
    /// Element type code (0 unless reduce/allreduce).
    pub element_type: u8,
    /// Reduction code (0 unless reduce/allreduce).
    pub reduction: u8,
    /// Phase.
    pub phase: Phase,
    /// Root rank (0 for barrier and allreduce).
    pub root: u32,
    /// The sender's collective call count, from 1.
    pub sequence: u64,
}

/// A COLLECTIVE payload: header and borrowed data (at most 16777200 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collective<'a> {
    /// The collective header.
    pub header: CollectiveHeader,
    /// The data.
    pub data: &'a [u8],
}

impl CollectiveHeader {
    /// The 16 bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut v = Vec::with_capacity(16);
        v.push(self.operation.code());
        v.push(self.element_type);
        v.push(self.reduction);
        v.push(self.phase as u8);
        v.put_u32(self.root);
        v.put_u64(self.sequence);
        let mut out = [0u8; 16];
        out.copy_from_slice(&v);
        out
    }

    /// Reads and validates the 16 bytes.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let op = r.u8("operation")?;
        let operation = Operation::from_code(op).ok_or(DecodeError::OutOfRange {
            field: "operation",
            min: 1,
            max: 6,
            got: u64::from(op),
        })?;
        let element_type = r.u8("element_type")?;
        let reduction = r.u8("reduction")?;
        let ph = r.u8("phase")?;
        let phase = match ph {
            0 => Phase::ToRoot,
            1 => Phase::FromRoot,
            _ => {
                return Err(DecodeError::OutOfRange {
                    field: "phase",
                    min: 0,
                    max: 1,
                    got: u64::from(ph),
                })
            }
        };
        let root = r.u32("root")?;
        let sequence = r.u64("sequence")?;
        if operation.reduces() {
            if element_type > 6 {
                return Err(DecodeError::OutOfRange {
                    field: "element_type",
                    min: 0,
                    max: 6,
                    got: u64::from(element_type),
                });
            }
            if !(1..=10).contains(&reduction) {
                return Err(DecodeError::OutOfRange {
                    field: "reduction",
                    min: 1,
                    max: 10,
                    got: u64::from(reduction),
                });
            }
        } else {
            if element_type != 0 {
                return Err(DecodeError::NotZero {
                    field: "element_type",
                    got: u64::from(element_type),
                });
            }
            if reduction != 0 {
                return Err(DecodeError::NotZero {
                    field: "reduction",
                    got: u64::from(reduction),
                });
            }
        }
        Ok(Self {
            operation,
            element_type,
            reduction,
            phase,
            root,
            sequence,
        })
    }
}

impl<'a> Codec<'a> for Collective<'a> {
    const NAME: &'static str = "COLLECTIVE payload";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.header.to_bytes());
        out.extend_from_slice(self.data);
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let header = CollectiveHeader::read(r)?;
        Ok(Self {
            header,
            data: r.rest(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(op: Operation, et: u8, red: u8) -> CollectiveHeader {
        CollectiveHeader {
            operation: op,
            element_type: et,
            reduction: red,
            phase: Phase::ToRoot,
            root: 0,
            sequence: 1,
        }
    }

    #[test]
    fn rules() {
        let ok = sample(Operation::Allreduce, 6, 1).to_bytes();
        assert!(Collective::decode(&ok).is_ok());
        for n in 0..16 {
            assert!(Collective::decode(&ok[..n]).is_err());
        }
        assert!(Collective::decode(&sample(Operation::Reduce, 7, 1).to_bytes()).is_err());
        assert!(Collective::decode(&sample(Operation::Reduce, 6, 11).to_bytes()).is_err());
        assert!(Collective::decode(&sample(Operation::Reduce, 6, 0).to_bytes()).is_err());
        assert!(Collective::decode(&sample(Operation::Bcast, 1, 0).to_bytes()).is_err());
        assert!(Collective::decode(&sample(Operation::Gather, 0, 1).to_bytes()).is_err());
        let mut bad_op = ok;
        bad_op[0] = 7;
        assert!(Collective::decode(&bad_op).is_err());
        let mut bad_phase = ok;
        bad_phase[3] = 2;
        assert!(Collective::decode(&bad_phase).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(op in 1u8..=6, et in 0u8..=6, red in 1u8..=10, ph in 0u8..=1, root: u32, seq: u64,
                      data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let operation = Operation::from_code(op).unwrap();
            let (et, red) = if operation.reduces() { (et, red) } else { (0, 0) };
            let c = Collective {
                header: CollectiveHeader { operation, element_type: et, reduction: red,
                    phase: if ph == 0 { Phase::ToRoot } else { Phase::FromRoot }, root, sequence: seq },
                data: &data,
            };
            let bytes = c.to_vec();
            prop_assert_eq!(Collective::decode(&bytes).unwrap(), c);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Collective::decode(&bytes);
        }
    }
}
