//! allreduce as an owner fold (HELLO feature bit 7, protocol §20): block
//! b of every rank's array goes as PARTIAL chunks straight to rank b, which
//! folds chunk k of its block from every rank in ascending rank order (the
//! star's operands in the star's order, protocol §20.5) and sends the
//! result chunk as FINAL to every other rank. Every rank sends and
//! receives 2(n-1)/n of the array, where the chain of protocol §14.3 moves
//! the whole array twice through every rank.
//!
//! The schedule, per rank (protocol §20.3): the OPEN step of §14.3 (rank
//! 0 takes every OPEN before it sends); the
//! PARTIAL chunks of step 0 to every other rank; then for each step k: the
//! PARTIAL chunks of step k+1 (one step ahead, so the links stay busy while
//! this rank folds), the fold of chunk k of its own block and its FINAL
//! chunk to every other rank, and the FINAL chunks k of every other block.
//! Frames of one sender come in its order; a PARTIAL chunk that comes while
//! a FINAL one is awaited is kept until its fold.

use std::collections::VecDeque;
use std::ops::Range;

use sperli_wire::collective::Phase;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::MismatchError;
use sperli_wire::owner_fold::{block, owner_fold_chunk};
use sperli_wire::pipeline::ChunkStream;
use sperli_wire::reduce::combine_into;
use sperli_wire::Error;

use super::{chunk_head, Frame, Sink, Taken, CHUNK_DATA};
use crate::comm::{Call, Comm, Src};
use crate::peers::Peers;

/// The blocks of one call and the chunk length of each (protocol §20.2,
/// §20.3).
struct Layout {
    blocks: Vec<Range<usize>>,
    chunk: Vec<usize>,
}

impl Layout {
    fn new(len: usize, t: ElementType, n: u32) -> Self {
        let blocks: Vec<Range<usize>> = (0..n)
            .map(|b| {
                let r = block(len as u64, t.width(), n, b);
                r.start as usize..r.end as usize
            })
            .collect();
        let chunk = blocks
            .iter()
            .map(|b| owner_fold_chunk(b.len(), t.chunk_align()))
            .collect();
        Self { blocks, chunk }
    }

    /// The number of chunks of block `b`.
    fn count(&self, b: u32) -> usize {
        self.blocks[b as usize]
            .len()
            .div_ceil(self.chunk[b as usize])
    }

    /// Chunk `k` of block `b`, in bytes from the block's start.
    fn range(&self, b: u32, k: usize) -> Range<usize> {
        let (len, c) = (self.blocks[b as usize].len(), self.chunk[b as usize]);
        k * c..((k + 1) * c).min(len)
    }
}

/// What this rank takes from one other rank: the PARTIAL stream of its own
/// block and the FINAL stream of the sender's block (protocol §20.3).
struct Inbox {
    partial: ChunkStream,
    fin: ChunkStream,
    /// PARTIAL chunks taken, checked, not yet folded: their payloads.
    kept: VecDeque<Vec<u8>>,
}

/// What every step of one owner-fold call needs.
struct Fold<'a> {
    call: &'a Call,
    layout: Layout,
    t: ElementType,
    r: Reduction,
    inbox: Vec<Option<Inbox>>,
}

impl<L: Peers> Comm<L> {
    /// A pipelined allreduce as the owner fold of protocol §20 (the caller
    /// decided that it runs, §20.1, and made the before-send checks of
    /// §8.4). The whole result goes to `out`.
    pub(crate) fn owner_fold<D: Src + ?Sized>(
        &self,
        call: &Call,
        data: &D,
        t: ElementType,
        r: Reduction,
        out: &mut dyn Sink,
    ) -> Result<(), Error> {
        let (me, n) = (self.rank(), self.size());
        let layout = Layout::new(call.len, t, n);
        let inbox = (0..n)
            .map(|q| {
                (q != me).then(|| Inbox {
                    partial: ChunkStream::new(layout.blocks[me as usize].len() as u64),
                    fin: ChunkStream::new(layout.blocks[q as usize].len() as u64),
                    kept: VecDeque::new(),
                })
            })
            .collect();
        let mut f = Fold {
            call,
            layout,
            t,
            r,
            inbox,
        };
        let steps = (0..n).map(|b| f.layout.count(b)).max().unwrap_or(0);
        // The OPEN step (protocol §14.3, §20.3): rank 0 takes every OPEN
        // before it sends anything, so that a rank that chose the star
        // meets rank 0's shape check (H1618), not a PARTIAL chunk.
        if me != 0 {
            self.send_open(0, call, 0, call.len, 1)?;
        } else {
            self.take_opens(call)?;
        }
        self.send_partials(&f, data, 0)?;
        let others: Vec<u32> = (1..n).map(|i| (me + i) % n).collect();
        for k in 0..steps {
            if k + 1 < steps {
                self.send_partials(&f, data, k + 1)?;
            }
            if k < f.layout.count(me) {
                self.fold_chunk(&mut f, data, out, k, &others)?;
            }
            for &o in &others {
                if k < f.layout.count(o) {
                    let end = f.layout.range(o, k).end as u64;
                    while self.inbox(&f, o).fin.taken() < end {
                        let frame = self.take(o)?;
                        self.route(&mut f, out, o, frame)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn inbox<'f>(&self, f: &'f Fold<'_>, q: u32) -> &'f Inbox {
        f.inbox[q as usize]
            .as_ref()
            .expect("an inbox per other rank")
    }

    /// The PARTIAL chunks of step `k` to every other rank whose block has
    /// one, starting with the next rank up (so that not every rank starts
    /// with rank 0).
    fn send_partials<D: Src + ?Sized>(
        &self,
        f: &Fold<'_>,
        data: &D,
        k: usize,
    ) -> Result<(), Error> {
        let (me, n) = (self.rank(), self.size());
        for b in (1..n).map(|i| (me + i) % n) {
            if k >= f.layout.count(b) {
                continue;
            }
            let blk = &f.layout.blocks[b as usize];
            let rg = f.layout.range(b, k);
            let head = chunk_head(f.call, Phase::Partial, b, rg.start, blk.len());
            self.send_headed(b, &head, data, blk.start + rg.start..blk.start + rg.end)?;
        }
        Ok(())
    }

    /// Chunk `k` of this rank's block: the ascending fold of every rank's
    /// bytes of its range, the lower ranks' fold the left operand
    /// (protocol §20.5), kept and sent as FINAL to every other rank.
    fn fold_chunk<D: Src + ?Sized>(
        &self,
        f: &mut Fold<'_>,
        data: &D,
        out: &mut dyn Sink,
        k: usize,
        others: &[u32],
    ) -> Result<(), Error> {
        let (me, n) = (self.rank(), self.size());
        let blk = f.layout.blocks[me as usize].clone();
        let rg = f.layout.range(me, k);
        let own = blk.start + rg.start..blk.start + rg.end;
        let mut acc = if me == 0 {
            let mut head = chunk_head(f.call, Phase::Final, 0, rg.start, blk.len());
            data.put(own.clone(), &mut head);
            head
        } else {
            self.next_partial(f, out, 0)?
        };
        for i in 1..n {
            let folded = if i == me {
                self.with_bytes(data, own.clone(), |mine| {
                    combine_into(&mut acc[CHUNK_DATA..], mine, f.t, f.r)
                })
            } else {
                let p = self.next_partial(f, out, i)?;
                let res = combine_into(&mut acc[CHUNK_DATA..], &p[CHUNK_DATA..], f.t, f.r);
                self.recycle(p);
                res
            };
            if let Err(e) = folded {
                return self.fail_job(
                    sperli_wire::abort::AbortReason::CollectiveMismatch,
                    e.into(),
                );
            }
        }
        acc[3] = Phase::Final as u8;
        out.put(own.start, &acc[CHUNK_DATA..]);
        self.send_each(others, &acc)?;
        self.recycle(acc);
        Ok(())
    }

    /// The next PARTIAL chunk of this rank's block from `from` (its payload),
    /// taking FINAL chunks that come before it.
    fn next_partial(
        &self,
        f: &mut Fold<'_>,
        out: &mut dyn Sink,
        from: u32,
    ) -> Result<Vec<u8>, Error> {
        loop {
            let inbox = f.inbox[from as usize].as_mut().expect("an inbox");
            if let Some(p) = inbox.kept.pop_front() {
                return Ok(p);
            }
            let frame = self.take(from)?;
            self.route(f, out, from, frame)?;
        }
    }

    /// One frame from `from`: checks 3 and 5-7 of protocol §14.4 and the
    /// chunk length of protocol §20.4; a PARTIAL chunk is kept for its fold,
    /// a FINAL chunk's bytes go to `out`.
    fn route(
        &self,
        f: &mut Fold<'_>,
        out: &mut dyn Sink,
        from: u32,
        frame: Frame,
    ) -> Result<(), Error> {
        let me = self.rank();
        let h = frame.header;
        let inbox = f.inbox[from as usize].as_mut().expect("an inbox");
        let p_due = !inbox.partial.is_complete();
        let f_due = !inbox.fin.is_complete();
        let (phase, block_of, stream) = match h.phase {
            Phase::Partial if p_due => (Phase::Partial, me, &mut inbox.partial),
            Phase::Final if f_due => (Phase::Final, from, &mut inbox.fin),
            _ => {
                // Not a phase due from this sender now: H1617 (the first
                // field of check 3 that differs, with the first due
                // phase's root; both streams complete: FINAL's).
                let due = [(Phase::Partial, p_due, me), (Phase::Final, f_due, from)];
                let mut phases: Vec<Phase> = due.iter().filter(|d| d.1).map(|d| d.0).collect();
                let (first, root) = due
                    .iter()
                    .find(|d| d.1)
                    .map_or((Phase::Final, from), |d| (d.0, d.2));
                if phases.is_empty() {
                    phases.push(first);
                }
                self.check_due(from, &h, f.call, root, &phases)?;
                return self.mismatch(MismatchError::Header {
                    from,
                    field: "phase",
                    expected: first as u64,
                    got: h.phase as u64,
                });
            }
        };
        self.check_due(from, &h, f.call, block_of, &[phase])?;
        let Taken::Chunk(ch) = frame.body else {
            unreachable!("phases 3 and 4 decode as chunks")
        };
        let n_bytes = frame.buf.len() - CHUNK_DATA;
        let rg = self.check_chunk(from, stream, &ch, n_bytes, phase)?;
        // Protocol §20.4: every chunk is the fixed length L of §20.3.
        let c = f.layout.chunk[block_of as usize];
        let want = rg.start + c.min(f.layout.blocks[block_of as usize].len() - rg.start);
        if rg.end != want {
            return self.mismatch(MismatchError::Chunk {
                from,
                field: "length",
                expected: (want - rg.start) as u64,
                got: rg.len() as u64,
            });
        }
        if phase == Phase::Partial {
            inbox.kept.push_back(frame.buf);
        } else {
            let at = f.layout.blocks[from as usize].start + rg.start;
            out.put(at, &frame.buf[CHUNK_DATA..]);
            self.recycle(frame.buf);
        }
        Ok(())
    }
}
