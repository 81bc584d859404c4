//! COLLECTIVE (3): the 16-byte collective header, then data (protocol
//! §7.3). With HELLO feature bit 1 the header also takes the
//! pipelined operations and phases of protocol §14.2
//! ([`CollectiveHeader::read_with`]); the bodies of those frames are in
//! [`crate::pipeline`].

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;
use crate::limits::{FEATURE_ELEMENT_TYPES, FEATURE_PIPELINED, FEATURE_V1_CORE};

/// Collective operations (protocol §7.3; 7 and 8 only with feature bit 1,
/// protocol §14.2).
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
    /// 7: allgather as one pipelined call (feature bit 1 only, protocol §14.2).
    Allgather = 7,
    /// 8: reduce_scatter as one pipelined call (feature bit 1 only, protocol §14.2).
    ReduceScatter = 8,
}

impl Operation {
    /// The operation for a code 1..=8 (7 and 8 exist only with feature
    /// bit 1; [`CollectiveHeader::read_with`] judges that).
    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            1 => Operation::Barrier,
            2 => Operation::Bcast,
            3 => Operation::Reduce,
            4 => Operation::Allreduce,
            5 => Operation::Gather,
            6 => Operation::Scatter,
            7 => Operation::Allgather,
            8 => Operation::ReduceScatter,
            _ => return None,
        })
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Whether the header carries an element type and a reduction.
    pub fn reduces(self) -> bool {
        matches!(
            self,
            Operation::Reduce | Operation::Allreduce | Operation::ReduceScatter
        )
    }

    /// Whether the operation may run pipelined (protocol §14.2: bcast,
    /// reduce, allreduce, allgather, reduce_scatter; never barrier, gather
    /// or scatter).
    pub fn pipelines(self) -> bool {
        !matches!(
            self,
            Operation::Barrier | Operation::Gather | Operation::Scatter
        )
    }

    /// Whether the operation exists only pipelined (7 and 8: they have no
    /// star phases; their small form is two v1 calls).
    pub fn pipelined_only(self) -> bool {
        matches!(self, Operation::Allgather | Operation::ReduceScatter)
    }
}

/// Phase: toward the root (0) or from the root (1) in v1; with feature
/// bit 1 also the three pipelined phases of protocol §14.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Phase {
    /// 0: toward the root.
    ToRoot = 0,
    /// 1: from the root.
    FromRoot = 1,
    /// 2: OPEN, the star step that starts a pipelined call (bit 1).
    Open = 2,
    /// 3: PARTIAL, a chunk of a fold in flight along the chain (bit 1).
    Partial = 3,
    /// 4: FINAL, a chunk of final data: a result or broadcast data (bit 1).
    Final = 4,
}

impl Phase {
    /// The phase for a code 0..=4.
    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => Phase::ToRoot,
            1 => Phase::FromRoot,
            2 => Phase::Open,
            3 => Phase::Partial,
            4 => Phase::Final,
            _ => return None,
        })
    }

    /// Whether this is one of the pipelined phases 2..=4.
    pub fn pipelined(self) -> bool {
        self as u8 >= 2
    }
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

    /// Reads and validates the 16 bytes by the v1 rules (protocol §7.3,
    /// §8.4): operation 1..=6, phase 0..=1.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Self::read_with(r, FEATURE_V1_CORE)
    }

    /// Reads and validates the 16 bytes in a job whose negotiated HELLO
    /// features are `features` (protocol §7.1.1). Without bit 1 these are
    /// the v1 rules of [`CollectiveHeader::read`], so a pipelined frame in a
    /// job that did not negotiate it does not decode (H1610). With bit 1
    /// (protocol §14.2): operation 1..=8 and phase 0..=4, where operations 7
    /// and 8 take only phases 2..=4, barrier, gather and scatter only 0..=1,
    /// and phase 3 (PARTIAL) only the reducing operations 3, 4 and 8. The
    /// rules are judged in the order operation, phase, element_type,
    /// reduction; `root` and `sequence` decode whatever their value (the
    /// call that takes the frame judges them: H1617, protocol §8.4 "What
    /// decodes"). With bit 4 (protocol §17.1) a reducing operation takes
    /// element types 0..=17 and reductions 1..=13.
    pub fn read_with(r: &mut Reader<'_>, features: u64) -> Result<Self, DecodeError> {
        let pipelined = features & FEATURE_PIPELINED != 0;
        let max_op = if pipelined { 8 } else { 6 };
        let op = r.u8("operation")?;
        let operation = Operation::from_code(op)
            .filter(|o| o.code() <= max_op)
            .ok_or(DecodeError::OutOfRange {
                field: "operation",
                min: 1,
                max: u64::from(max_op),
                got: u64::from(op),
            })?;
        let element_type = r.u8("element_type")?;
        let reduction = r.u8("reduction")?;
        let ph = r.u8("phase")?;
        // Protocol §14.2: the phases each operation may carry.
        let (min_phase, max_phase) = match operation {
            _ if !pipelined => (0, 1),
            o if o.pipelined_only() => (2, 4),
            o if !o.pipelines() => (0, 1),
            _ => (0, 4),
        };
        let phase = Phase::from_code(ph)
            .filter(|p| (min_phase..=max_phase).contains(&(*p as u8)))
            .filter(|p| *p != Phase::Partial || operation.reduces())
            .ok_or(DecodeError::OutOfRange {
                field: "phase",
                min: u64::from(min_phase),
                max: u64::from(max_phase),
                got: u64::from(ph),
            })?;
        let root = r.u32("root")?;
        let sequence = r.u64("sequence")?;
        if operation.reduces() {
            // Protocol §17.1: with feature bit 4, element types 0..=17 and
            // reductions 1..=13; without it the v1 ranges of §8.4.
            let (max_type, max_reduction) = if features & FEATURE_ELEMENT_TYPES != 0 {
                (17, 13)
            } else {
                (6, 10)
            };
            if element_type > max_type {
                return Err(DecodeError::OutOfRange {
                    field: "element_type",
                    min: 0,
                    max: u64::from(max_type),
                    got: u64::from(element_type),
                });
            }
            if !(1..=max_reduction).contains(&reduction) {
                return Err(DecodeError::OutOfRange {
                    field: "reduction",
                    min: 1,
                    max: u64::from(max_reduction),
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
    fn bit_4_widens_element_types_and_reductions() {
        use crate::limits::FEATURE_ELEMENT_TYPES;
        let ext = FEATURE_V1_CORE | FEATURE_ELEMENT_TYPES;
        let read = |h: CollectiveHeader, f| {
            CollectiveHeader::read_with(&mut Reader::new(&h.to_bytes()), f)
        };
        for (et, red) in [(17, 11), (7, 13), (12, 2)] {
            let h = sample(Operation::Allreduce, et, red);
            assert_eq!(read(h, ext), Ok(h));
            assert!(read(h, FEATURE_V1_CORE).is_err());
        }
        assert!(read(sample(Operation::Reduce, 18, 1), ext).is_err());
        assert!(read(sample(Operation::Reduce, 1, 14), ext).is_err());
        assert!(read(sample(Operation::Bcast, 7, 0), ext).is_err());
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

    #[test]
    fn pipelined_phases_and_operations_need_bit_1() {
        const BOTH: u64 = FEATURE_V1_CORE | FEATURE_PIPELINED;
        let h = |op: u8, et: u8, red: u8, ph: u8| {
            let mut b = sample(Operation::Allreduce, 6, 1).to_bytes();
            b[0] = op;
            b[1] = et;
            b[2] = red;
            b[3] = ph;
            b
        };
        let read = |b: &[u8; 16], f: u64| CollectiveHeader::read_with(&mut Reader::new(b), f);
        let phase = |b: &[u8; 16], f: u64| match read(b, f) {
            Err(DecodeError::OutOfRange { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        // Without bit 1 every pipelined phase and operation is H1610.
        for ph in 2..=4 {
            assert_eq!(phase(&h(4, 6, 1, ph), FEATURE_V1_CORE), "phase");
        }
        assert_eq!(phase(&h(7, 0, 0, 4), FEATURE_V1_CORE), "operation");
        assert_eq!(phase(&h(8, 6, 1, 3), FEATURE_V1_CORE), "operation");
        // With it: allreduce takes 0..=4, bcast no PARTIAL, 7 and 8 no star
        // phase, barrier/gather/scatter never a pipelined one.
        for ph in 0..=4 {
            assert_eq!(read(&h(4, 6, 1, ph), BOTH).unwrap().phase as u8, ph);
        }
        assert!(read(&h(2, 0, 0, 2), BOTH).is_ok());
        assert_eq!(phase(&h(2, 0, 0, 3), BOTH), "phase");
        assert_eq!(phase(&h(7, 0, 0, 1), BOTH), "phase");
        assert_eq!(phase(&h(7, 0, 0, 3), BOTH), "phase");
        assert!(read(&h(7, 0, 0, 4), BOTH).is_ok());
        assert!(read(&h(8, 5, 2, 3), BOTH).is_ok());
        assert_eq!(phase(&h(8, 5, 2, 0), BOTH), "phase");
        for op in [1, 5, 6] {
            assert_eq!(phase(&h(op, 0, 0, 2), BOTH), "phase");
            assert!(read(&h(op, 0, 0, 1), BOTH).is_ok());
        }
        assert_eq!(phase(&h(9, 0, 0, 2), BOTH), "operation");
        // Element type and reduction rules as in v1, for 8 like reduce.
        assert!(read(&h(8, 7, 1, 3), BOTH).is_err());
        assert!(read(&h(7, 1, 0, 4), BOTH).is_err());
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
