//! reduce, allreduce and reduce_scatter as a pipelined chain (protocol
//! §14.3): PARTIAL chunks run 0 → 1 → … → n-1, each rank folding its own
//! bytes of the same range into the chunk with the chunk (the fold of the
//! lower ranks) as the left operand, so every element is folded exactly as
//! the star folds it (protocol §14.6); FINAL chunks then carry the result
//! on: to the root (reduce), around the ring n-1 → 0 → … → n-2
//! (allreduce), or along that ring to the rank whose block it is
//! (reduce_scatter).

use sperli_wire::abort::AbortReason;
use sperli_wire::collective::Phase;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::MismatchError;
use sperli_wire::pipeline::ChunkStream;
use sperli_wire::reduce::combine_into;
use sperli_wire::Error;

use super::{chunk_head, chunk_ranges, Frame, Sink, Taken, CHUNK_DATA};
use crate::comm::{Call, Comm, Src};
use crate::peers::Peers;

/// Which reduce-type call runs along the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChainOp {
    /// reduce to `root`.
    Reduce {
        /// The call's root.
        root: u32,
    },
    /// allreduce.
    Allreduce,
    /// reduce_scatter: block b of the array goes to rank b.
    ReduceScatter,
}

/// One stream's bytes in the array: for reduce and allreduce the whole
/// array, for reduce_scatter block b (protocol §14.2: the root field).
#[derive(Debug, Clone, Copy)]
struct Block {
    root_field: u32,
    start: usize,
    len: usize,
}

/// What a rank does with the FINAL chunks (protocol §14.3).
#[derive(Debug, Clone, Copy)]
struct Roles {
    kind: ChainOp,
    me: u32,
    n: u32,
}

impl Roles {
    fn tail(&self) -> bool {
        self.me == self.n - 1
    }

    /// The sender of this rank's FINAL chunks and the blocks due, in order
    /// (none at the tail, which makes them).
    fn finals_due(&self) -> Option<(u32, std::ops::RangeInclusive<u32>)> {
        let (me, n) = (self.me, self.n);
        let pred = if me == 0 { n - 1 } else { me - 1 };
        match self.kind {
            _ if self.tail() => None,
            ChainOp::Allreduce => Some((pred, 0..=0)),
            ChainOp::ReduceScatter => Some((pred, me..=n - 2)),
            ChainOp::Reduce { root } if root == me => Some((n - 1, 0..=0)),
            ChainOp::Reduce { .. } => None,
        }
    }

    /// Whether this rank keeps block `b` of the result.
    fn keeps(&self, b: u32) -> bool {
        match self.kind {
            ChainOp::Allreduce => true,
            ChainOp::ReduceScatter => b == self.me,
            ChainOp::Reduce { root } => root == self.me,
        }
    }

    /// Where this rank sends a FINAL chunk of block `b` (the tail: the
    /// result it folded).
    fn final_to(&self, b: u32) -> Option<u32> {
        let (me, n) = (self.me, self.n);
        match self.kind {
            ChainOp::Reduce { root } => (self.tail() && root != me).then_some(root),
            ChainOp::Allreduce if self.tail() => Some(0),
            ChainOp::Allreduce => (me + 2 < n).then_some(me + 1),
            ChainOp::ReduceScatter if self.tail() => (b < n - 1).then_some(0),
            ChainOp::ReduceScatter => (b > me).then_some(me + 1),
        }
    }

    fn has_result(&self) -> bool {
        match self.kind {
            ChainOp::Reduce { root } => root == self.me,
            _ => true,
        }
    }
}

/// The next stream of a sequence of blocks (protocol §14.4: the chunks of
/// one block arrive in order; blocks in the order of §14.3).
struct Streams {
    blocks: std::ops::RangeInclusive<u32>,
    current: Option<(u32, ChunkStream)>,
}

impl Streams {
    fn new(mut blocks: std::ops::RangeInclusive<u32>, len: impl Fn(u32) -> usize) -> Self {
        let current = blocks.next().map(|b| (b, ChunkStream::new(len(b) as u64)));
        Self { blocks, current }
    }

    fn advance(&mut self, len: impl Fn(u32) -> usize) {
        if self.current.as_ref().is_some_and(|(_, s)| s.is_complete()) {
            self.current = self
                .blocks
                .next()
                .map(|b| (b, ChunkStream::new(len(b) as u64)));
        }
    }
}

impl<L: Peers> Comm<L> {
    /// A pipelined reduce-type call (protocol §14.3) whose arguments passed
    /// the checks of protocol §8.4; `call.len` is the length of `data`.
    /// The result goes to `out`: reduce: the whole array at the root;
    /// allreduce: the whole array; reduce_scatter: this rank's block, at
    /// offsets from 0. Returns whether this rank has a result.
    pub(crate) fn chain<D: Src + ?Sized>(
        &self,
        call: &Call,
        kind: ChainOp,
        data: &D,
        t: ElementType,
        r: Reduction,
        out: &mut dyn Sink,
    ) -> Result<bool, Error> {
        let (me, n) = (self.rank(), self.size());
        let s = call.len;
        let blocks: Vec<Block> = match kind {
            ChainOp::ReduceScatter => {
                let b = s / n as usize;
                (0..n)
                    .map(|i| Block {
                        root_field: i,
                        start: i as usize * b,
                        len: b,
                    })
                    .collect()
            }
            _ => vec![Block {
                root_field: call.root,
                start: 0,
                len: s,
            }],
        };
        let roles = Roles { kind, me, n };
        let collector = match kind {
            ChainOp::Reduce { root } => root,
            _ => 0,
        };
        // The OPEN step (protocol §14.3): the collector takes every OPEN
        // before it waits for anything else; rank 0 may send first.
        if me != collector {
            self.send_open(collector, call, call.root, s, 1)?;
        } else if me != 0 {
            self.take_opens(call)?;
        }
        if me == 0 {
            for b in &blocks {
                let c = self.stream_chunk(call, b.len);
                for rg in chunk_ranges(b.len, c) {
                    let own = b.start + rg.start..b.start + rg.end;
                    let head = chunk_head(call, Phase::Partial, b.root_field, rg.start, b.len);
                    self.send_headed(1, &head, data, own)?;
                }
            }
            if collector == 0 {
                self.take_opens(call)?;
            }
        }
        let ctx = Chain {
            call,
            roles,
            blocks: &blocks,
            t,
            r,
        };
        let finals = roles.finals_due();
        if me >= 1 {
            let pred = me - 1;
            let with_finals = finals.clone().filter(|(from, _)| *from == pred);
            self.take_from(&ctx, data, out, pred, true, with_finals.map(|f| f.1))?;
        }
        if let Some((from, due)) = finals {
            if me == 0 || from != me - 1 {
                self.take_from(&ctx, data, out, from, false, Some(due))?;
            }
        }
        Ok(roles.has_result())
    }

    /// The collector's OPEN step: every other rank's OPEN, ascending.
    pub(crate) fn take_opens(&self, call: &Call) -> Result<(), Error> {
        let me = self.rank();
        for q in (0..self.size()).filter(|&q| q != me) {
            self.take_open_at_collector(q, call)?;
        }
        Ok(())
    }

    /// Takes from `from` every PARTIAL chunk (when `partial`) and the FINAL
    /// chunks of the blocks `finals`, in arrival order, and does with each
    /// what protocol §14.3 says.
    fn take_from<D: Src + ?Sized>(
        &self,
        ctx: &Chain<'_>,
        data: &D,
        out: &mut dyn Sink,
        from: u32,
        partial: bool,
        finals: Option<std::ops::RangeInclusive<u32>>,
    ) -> Result<(), Error> {
        let len = |b: u32| ctx.blocks[b as usize].len;
        let last = ctx.blocks.len() as u32 - 1;
        let mut p = partial.then(|| Streams::new(0..=last, len));
        let mut f = finals.map(|due| Streams::new(due, len));
        loop {
            let p_due = p.as_ref().and_then(|s| s.current.as_ref().map(|c| c.0));
            let f_due = f.as_ref().and_then(|s| s.current.as_ref().map(|c| c.0));
            if p_due.is_none() && f_due.is_none() {
                return Ok(());
            }
            let frame = self.take(from)?;
            match (frame.header.phase, p_due, f_due) {
                (Phase::Partial, Some(b), _) => {
                    let s = p.as_mut().expect("due");
                    self.on_partial(
                        ctx,
                        data,
                        out,
                        from,
                        frame,
                        b,
                        &mut s.current.as_mut().expect("due").1,
                    )?;
                    s.advance(len);
                }
                (Phase::Final, _, Some(b)) => {
                    let s = f.as_mut().expect("due");
                    self.on_final(
                        ctx,
                        out,
                        from,
                        frame,
                        b,
                        &mut s.current.as_mut().expect("due").1,
                    )?;
                    s.advance(len);
                }
                _ => {
                    // Not a phase due from this sender now: H1617.
                    let phases: Vec<Phase> = [(Phase::Partial, p_due), (Phase::Final, f_due)]
                        .iter()
                        .filter_map(|(ph, due)| due.map(|_| *ph))
                        .collect();
                    let b = p_due.or(f_due).expect("one is due");
                    let root = ctx.blocks[b as usize].root_field;
                    self.check_due(from, &frame.header, ctx.call, root, &phases)?;
                    return self.mismatch(MismatchError::Header {
                        from,
                        field: "phase",
                        expected: phases[0] as u64,
                        got: frame.header.phase as u64,
                    });
                }
            }
        }
    }

    /// A PARTIAL chunk of block `b`: fold this rank's bytes of the same
    /// range in (the chunk is the left operand) and send it on; at the tail
    /// it is a chunk of the result.
    #[allow(clippy::too_many_arguments)]
    fn on_partial<D: Src + ?Sized>(
        &self,
        ctx: &Chain<'_>,
        data: &D,
        out: &mut dyn Sink,
        from: u32,
        frame: Frame,
        b: u32,
        stream: &mut ChunkStream,
    ) -> Result<(), Error> {
        let block = ctx.blocks[b as usize];
        self.check_due(
            from,
            &frame.header,
            ctx.call,
            block.root_field,
            &[Phase::Partial],
        )?;
        let Taken::Chunk(ch) = frame.body else {
            unreachable!("phase 3 decodes as a chunk")
        };
        let n_bytes = frame.buf.len() - CHUNK_DATA;
        let rg = self.check_chunk(from, stream, &ch, n_bytes, Phase::Partial)?;
        let own = block.start + rg.start..block.start + rg.end;
        let mut buf = frame.buf;
        let folded = self.with_bytes(data, own, |mine| {
            combine_into(&mut buf[CHUNK_DATA..], mine, ctx.t, ctx.r)
        });
        if let Err(e) = folded {
            return self.fail_job(AbortReason::CollectiveMismatch, e.into());
        }
        let roles = ctx.roles;
        if !roles.tail() {
            return self.send_vec(roles.me + 1, buf);
        }
        if roles.keeps(b) {
            out.put(ctx.result_offset(block, rg.start), &buf[CHUNK_DATA..]);
        }
        match roles.final_to(b) {
            Some(to) => {
                buf[3] = Phase::Final as u8;
                self.send_vec(to, buf)
            }
            None => {
                self.recycle(buf);
                Ok(())
            }
        }
    }

    /// A FINAL chunk of block `b`: keep it if it is this rank's, send it on
    /// along the ring if the ring goes on.
    fn on_final(
        &self,
        ctx: &Chain<'_>,
        out: &mut dyn Sink,
        from: u32,
        frame: Frame,
        b: u32,
        stream: &mut ChunkStream,
    ) -> Result<(), Error> {
        let block = ctx.blocks[b as usize];
        self.check_due(
            from,
            &frame.header,
            ctx.call,
            block.root_field,
            &[Phase::Final],
        )?;
        let Taken::Chunk(ch) = frame.body else {
            unreachable!("phase 4 decodes as a chunk")
        };
        let n_bytes = frame.buf.len() - CHUNK_DATA;
        let rg = self.check_chunk(from, stream, &ch, n_bytes, Phase::Final)?;
        if ctx.roles.keeps(b) {
            out.put(ctx.result_offset(block, rg.start), &frame.buf[CHUNK_DATA..]);
        }
        match ctx.roles.final_to(b) {
            Some(to) => self.send_vec(to, frame.buf),
            None => {
                self.recycle(frame.buf);
                Ok(())
            }
        }
    }
}

/// What every step of one chain call needs.
struct Chain<'a> {
    call: &'a Call,
    roles: Roles,
    blocks: &'a [Block],
    t: ElementType,
    r: Reduction,
}

impl Chain<'_> {
    /// Where a chunk at `offset` of `block` goes in this rank's result: the
    /// whole array (reduce, allreduce) or its own block (reduce_scatter).
    fn result_offset(&self, block: Block, offset: usize) -> usize {
        match self.roles.kind {
            ChainOp::ReduceScatter => offset,
            _ => block.start + offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(kind: ChainOp, me: u32, n: u32) -> Roles {
        Roles { kind, me, n }
    }

    #[test]
    fn every_result_chunk_reaches_every_rank_that_keeps_it() {
        // Follow block b's FINAL chunks from the tail along final_to and
        // check each rank that keeps b is visited exactly once, and that
        // each visited rank (but the tail) expects them from its sender.
        for n in 2..=9 {
            for kind in [ChainOp::Allreduce, ChainOp::ReduceScatter]
                .into_iter()
                .chain((0..n).map(|root| ChainOp::Reduce { root }))
            {
                let nb = if kind == ChainOp::ReduceScatter { n } else { 1 };
                for b in 0..nb {
                    let mut at = n - 1;
                    let mut seen = vec![false; n as usize];
                    seen[at as usize] = true;
                    while let Some(to) = roles(kind, at, n).final_to(b) {
                        let (from, due) = roles(kind, to, n).finals_due().expect("due");
                        assert_eq!(from, at, "{kind:?} n={n} b={b}");
                        assert!(due.contains(&b), "{kind:?} n={n} b={b} at {to}");
                        assert!(!seen[to as usize], "{kind:?} n={n}: {to} twice");
                        seen[to as usize] = true;
                        at = to;
                    }
                    for r in 0..n {
                        if roles(kind, r, n).keeps(b) {
                            assert!(seen[r as usize], "{kind:?} n={n} b={b}: {r} never gets it");
                        }
                    }
                }
            }
        }
    }
}
