//! bcast along a chain or tree and allgather along a ring (protocol
//! §14.3): FINAL chunks that every rank hands on as it takes them. Nothing
//! is computed; the bytes arrive as the owner sent them.

use sperli_wire::collective::{Operation, Phase};
use sperli_wire::error::MismatchError;
use sperli_wire::limits::MAX_COLLECTIVE_DATA;
use sperli_wire::pipeline::{ChunkStream, PIPELINE_MIN_BYTES};
use sperli_wire::Error;

use super::shape::bcast_fanout;
use super::{chunk_head, chunk_ranges, Sink, Taken, CHUNK_DATA};
use crate::comm::{Call, Comm, Src};
use crate::peers::Peers;

const H: usize = sperli_wire::limits::COLLECTIVE_HEADER_LEN;

/// The ranks at the children positions of `pos` in the d-ary tree of
/// protocol §14.3 rooted at `root` over `n` ranks, ascending by position.
fn children(root: u32, pos: u32, d: u32, n: u32) -> Vec<u32> {
    let first = u64::from(d) * u64::from(pos) + 1;
    (first..first + u64::from(d))
        .take_while(|&p| p < u64::from(n))
        .map(|p| (root + p as u32) % n)
        .collect()
}

impl<L: Peers> Comm<L> {
    /// bcast in a job with feature bit 1 (protocol §14.1, §14.3). The root
    /// chooses the v1 star or the pipeline (protocol §14.5) and every other
    /// rank follows its first frame. At the root `data` is sent and `out`
    /// is not touched; elsewhere the data goes to `out`, checked to be
    /// `expect` bytes when given, else whole `width`-byte elements (H1617).
    /// `large`: a call of any length (the large helper); a plain call keeps
    /// the v1 limit of 16777200 bytes at the root (H1618, protocol §8.4).
    pub(crate) fn bcast_bit1<D: Src + ?Sized>(
        &self,
        root: u32,
        data: &D,
        width: usize,
        expect: Option<usize>,
        large: bool,
        out: &mut dyn Sink,
    ) -> Result<(), Error> {
        let seq = self.begin()?;
        self.check_root(root)?;
        let (me, n) = (self.rank(), self.size());
        let len = if me == root { data.byte_len() } else { 0 };
        let call = Call {
            op: Operation::Bcast,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len,
        };
        if me == root {
            if !large && len > MAX_COLLECTIVE_DATA {
                return self.root_data_too_long(len);
            }
            if n == 1 {
                return Ok(());
            }
            // The root's choice (protocol §14.5); with bit 7 (ranks on a
            // network, §20.1) a chain from T7 on, in 8 KiB chunks below T.
            let net = self.runs_network_bcast(len);
            // The first frame: to every rank, or with bit 8 to the root's
            // binomial children (protocol §21.2).
            let first = self.first_frame_targets(root);
            if !net && !self.runs_pipelined(Operation::Bcast, len) {
                let head = call.header(Phase::FromRoot);
                return self.send_headed_each(&first, &head, data, 0..len);
            }
            let c = self.stream_chunk(&call, len);
            let d = if net && (len as u64) < PIPELINE_MIN_BYTES {
                1
            } else {
                bcast_fanout(n, len, c)
            };
            for &q in &first {
                self.send_open(q, &call, root, len, d)?;
            }
            let kids = children(root, 0, d, n);
            for rg in chunk_ranges(len, c) {
                let head = chunk_head(&call, Phase::Final, root, rg.start, len);
                self.send_headed_each(&kids, &head, data, rg)?;
            }
            return Ok(());
        }
        // Protocol §14.3; with bit 8 the first frame comes from this
        // rank's binomial parent and goes on to its children (§21.2).
        let from = self.first_frame_source(root);
        let f = self.take(from)?;
        self.check_due(
            from,
            &f.header,
            &call,
            root,
            &[Phase::FromRoot, Phase::Open],
        )?;
        let first = self.first_frame_targets(root);
        let open = match f.body {
            Taken::Star => {
                let got = f.buf.len() - H;
                match expect {
                    Some(want) => self.expect_len(from, want, got)?,
                    None => self.expect_whole(from, width, got)?,
                }
                self.send_each(&first, &f.buf)?;
                out.announce(got);
                out.put(0, &f.buf[H..]);
                self.recycle(f.buf);
                return Ok(());
            }
            Taken::Open(o) => o,
            Taken::Chunk(_) => unreachable!("phases 1 and 2 are not chunks"),
        };
        if open.fanout >= n {
            return self.mismatch(MismatchError::Header {
                from,
                field: "fanout",
                expected: u64::from(n - 1),
                got: u64::from(open.fanout),
            });
        }
        let total = usize::try_from(open.total).unwrap_or(usize::MAX);
        match expect {
            Some(want) => self.expect_len(from, want, total)?,
            None => self.expect_whole(from, width, total)?,
        }
        // Protocol §21.2: the OPEN goes on before this rank takes a chunk.
        self.hand_on(&first, f.buf)?;
        out.announce(total);
        let d = open.fanout;
        let pos = (me + n - root) % n;
        let parent = (root + (pos - 1) / d) % n;
        let kids = children(root, pos, d, n);
        let mut stream = ChunkStream::new(open.total);
        while !stream.is_complete() {
            let f = self.take(parent)?;
            self.check_due(parent, &f.header, &call, root, &[Phase::Final])?;
            let Taken::Chunk(ch) = f.body else {
                unreachable!("phase 4 decodes as a chunk")
            };
            let rg = self.check_chunk(
                parent,
                &mut stream,
                &ch,
                f.buf.len() - CHUNK_DATA,
                Phase::Final,
            )?;
            out.put(rg.start, &f.buf[CHUNK_DATA..]);
            self.hand_on(&kids, f.buf)?;
        }
        Ok(())
    }

    /// Sends a chunk payload on to `to` (none: gives it back; one: hands it
    /// over without a copy; more: to each, the link may overlap them).
    fn hand_on(&self, to: &[u32], p: Vec<u8>) -> Result<(), Error> {
        match to {
            [] => {
                self.recycle(p);
                Ok(())
            }
            [one] => self.send_vec(*one, p),
            many => self.send_all(many.iter().copied(), p),
        }
    }

    /// allgather along a ring (protocol §14.3, operation 7): `data` is this
    /// rank's block of `call.len` bytes; `out` gets every block in rank
    /// order.
    pub(crate) fn allgather_ring<D: Src + ?Sized>(
        &self,
        call: &Call,
        data: &D,
        out: &mut dyn Sink,
    ) -> Result<(), Error> {
        let (me, n) = (self.rank(), self.size());
        let b = call.len;
        let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
        if me != 0 {
            self.send_open(0, call, 0, b, 1)?;
        }
        match data.slice(0..b) {
            Some(own) => out.put(me as usize * b, own),
            None => {
                let mut own = self.link.take_buffer(b);
                data.put(0..b, &mut own);
                out.put(me as usize * b, &own);
                self.recycle(own);
            }
        }
        let c = self.chunk_len(b, call.element_type);
        for rg in chunk_ranges(b, c) {
            let head = chunk_head(call, Phase::Final, me, rg.start, b);
            self.send_headed(next, &head, data, rg)?;
        }
        if me == 0 {
            for q in 1..n {
                self.take_open_at_collector(q, call)?;
            }
        }
        for k in 1..n {
            let origin = (me + n - k) % n;
            let mut stream = ChunkStream::new(b as u64);
            while !stream.is_complete() {
                let f = self.take(prev)?;
                self.check_due(prev, &f.header, call, origin, &[Phase::Final])?;
                let Taken::Chunk(ch) = f.body else {
                    unreachable!("phase 4 decodes as a chunk")
                };
                let rg = self.check_chunk(
                    prev,
                    &mut stream,
                    &ch,
                    f.buf.len() - CHUNK_DATA,
                    Phase::Final,
                )?;
                out.put(origin as usize * b + rg.start, &f.buf[CHUNK_DATA..]);
                if next == origin {
                    self.recycle(f.buf);
                } else {
                    self.send_vec(next, f.buf)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_has_one_parent_and_is_a_child_once() {
        for n in 2..=17u32 {
            for d in 1..n {
                for root in [0, n / 2, n - 1] {
                    let mut parent_of = vec![None; n as usize];
                    for pos in 0..n {
                        for k in children(root, pos, d, n) {
                            let r = (root + pos) % n;
                            assert!(parent_of[k as usize].replace(r).is_none());
                            // The receiver computes the same parent.
                            let kpos = (k + n - root) % n;
                            assert_eq!((root + (kpos - 1) / d) % n, r);
                        }
                    }
                    for r in 0..n {
                        assert_eq!(parent_of[r as usize].is_none(), r == root, "n={n} d={d}");
                    }
                }
            }
        }
    }
}
