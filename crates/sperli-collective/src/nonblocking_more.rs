//! The non-blocking forms of the remaining collectives (MPI's
//! `MPI_Ialltoall`, `MPI_Ireduce_scatter_block`, `MPI_Iscan`,
//! `MPI_Iexscan` and the v-calls): each is its blocking call issued to the
//! communicator's progress thread ([`crate::nonblocking`]), so it sends
//! exactly that call's frames in issue order (protocol §8.9); the data is
//! copied at the call.

use sperli_wire::element::Reduction;
use sperli_wire::Error;

use crate::comm::Comm;
use crate::element::Element;
use crate::nonblocking::Request;
use crate::peers::Peers;
use crate::vcoll::Blocks;

impl<L: Peers + Send + Sync + 'static> Comm<L> {
    /// Non-blocking [`Comm::alltoall`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     let r = c.rank() * 10;
    ///     c.ialltoall(&[r, r + 1]).unwrap().wait().unwrap()
    /// });
    /// assert_eq!(got, vec![vec![0, 10], vec![1, 11]]);
    /// ```
    pub fn ialltoall<T: Element>(&self, data: &[T]) -> Result<Request<Vec<T>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.alltoall(&data))
    }

    /// Non-blocking [`Comm::reduce_scatter`] (MPI's
    /// `MPI_Ireduce_scatter_block`).
    pub fn ireduce_scatter<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
    ) -> Result<Request<Vec<T>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.reduce_scatter(&data, op))
    }

    /// Non-blocking [`Comm::scan`].
    pub fn iscan<T: Element>(&self, data: &[T], op: Reduction) -> Result<Request<Vec<T>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.scan(&data, op))
    }

    /// Non-blocking [`Comm::exscan`] (`None` at rank 0).
    pub fn iexscan<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
    ) -> Result<Request<Option<Vec<T>>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.exscan(&data, op))
    }

    /// Non-blocking [`Comm::gatherv`].
    pub fn igatherv<T: Element>(
        &self,
        root: u32,
        data: &[T],
    ) -> Result<Request<Option<Blocks<T>>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.gatherv(root, &data))
    }

    /// Non-blocking [`Comm::scatterv`]: the root's data and counts.
    pub fn iscatterv<T: Element>(
        &self,
        root: u32,
        data: Option<(&[T], &[usize])>,
    ) -> Result<Request<Vec<T>>, Error> {
        let data = data.map(|(d, n)| (d.to_vec(), n.to_vec()));
        self.issue(move |c| {
            let arg = data.as_ref().map(|(d, n)| (&d[..], &n[..]));
            c.scatterv(root, arg)
        })
    }

    /// Non-blocking [`Comm::allgatherv`].
    pub fn iallgatherv<T: Element>(&self, data: &[T]) -> Result<Request<Blocks<T>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.allgatherv(&data))
    }

    /// Non-blocking [`Comm::alltoallv`]: `counts[r]` elements of `data` to
    /// rank r, in rank order.
    pub fn ialltoallv<T: Element>(
        &self,
        data: &[T],
        counts: &[usize],
    ) -> Result<Request<Blocks<T>>, Error> {
        let (data, counts) = (data.to_vec(), counts.to_vec());
        self.issue(move |c| c.alltoallv(&data, &counts))
    }
}
