//! Intercommunicators (the Rust `Intercomm`, protocol §15.6):
//! `Create_intercomm`, `Merge`, `Inter_dup`, `Inter_split`, the views
//! `Inter_local` and `Inter_groups`, and the object collectives across the
//! two groups (`Inter_bcast`, `Inter_gather`, `Inter_scatter`,
//! `Inter_allgather`, `Inter_alltoall`); the buffer collectives are in
//! inter_buf.rs.
//!
//! An intercommunicator is a `Comm` whose point-to-point calls and ranks
//! are the remote group's (its `size` is the remote size, its `rank` this
//! rank's in the local group); its collectives are the `Inter_` calls
//! only. Objects travel pickled, as bytes through the Rust call's u8 form
//! (the v-forms carry each rank's length).

use pyo3::prelude::*;
use sperli_collective::{Comm as RustComm, InterRoot, Intercomm};
use sperli_wire::abort::AbortReason;

use crate::comm::{Comm, UNDEFINED};
use crate::errors::BindingError;
use crate::inter_buf::inter_root;
use crate::objects::{pickle, unpickle};
use crate::rank::{Collectives, Kind, Rank, Shared, SubComm};

/// Pickles of a sequence's items, which must be `size` (else the
/// binding's `ScatterItems`).
fn pickles(
    items: Option<&Bound<'_, PyAny>>,
    size: u32,
) -> PyResult<Result<Vec<Vec<u8>>, BindingError>> {
    let list: Vec<Bound<'_, PyAny>> = match items {
        Some(o) if !o.is_none() => o.try_iter()?.collect::<PyResult<_>>()?,
        _ => Vec::new(),
    };
    if list.len() != size as usize {
        return Ok(Err(BindingError::ScatterItems {
            got: list.len(),
            size,
        }));
    }
    Ok(Ok(list
        .iter()
        .map(|o| Ok(pickle(o)?.as_bytes().to_vec()))
        .collect::<PyResult<_>>()?))
}

/// Blocks of `counts` bytes of `data`, unpickled into a list.
fn unpickled_list(py: Python<'_>, data: &[u8], counts: &[usize]) -> PyResult<Py<PyAny>> {
    let mut at = 0;
    let mut items = Vec::with_capacity(counts.len());
    for &c in counts {
        items.push(unpickle(py, &data[at..at + c])?);
        at += c;
    }
    Ok(pyo3::types::PyList::new(py, items)?.into_any().unbind())
}

impl Rank {
    /// The intercommunicator the running call is on.
    pub(crate) fn inter(&mut self) -> Result<&Intercomm<Shared>, BindingError> {
        match self.selected.and_then(|id| self.subs.get(&id)) {
            Some(SubComm::Inter(ic)) => Ok(ic),
            _ => Err(BindingError::NotIntercomm),
        }
    }

    /// The communicator of the running call as a plain `Comm` over the
    /// shared endpoint (a `Create_intercomm`'s local and peer
    /// communicators): `None` in a mailbox task and for the world once a
    /// checkpointer holds it.
    pub(crate) fn shared_comm(&self, sub: Option<u32>) -> Option<&RustComm<Shared>> {
        match sub {
            None => match &self.kind {
                Kind::Owned {
                    coll: Collectives::Plain(c),
                    ..
                } => Some(c),
                // The checkpointer holds the world's calls (`&mut` only).
                Kind::Owned { .. } | Kind::Task(_) => None,
            },
            Some(id) => match self.subs.get(&id)? {
                SubComm::Shared(c) => Some(c),
                SubComm::InterLocal(i) => match self.subs.get(i)? {
                    SubComm::Inter(ic) => Some(ic.local()),
                    _ => None,
                },
                _ => None,
            },
        }
    }
}

#[pymethods]
impl Comm {
    /// MPI's `Intercomm_create` (collective over this communicator, every
    /// rank with the same `local_leader`): this communicator's ranks and
    /// another disjoint group, whose leader is `remote_leader` of `peer`,
    /// joined in an intercommunicator. `peer` and `remote_leader` matter
    /// at the local leader only; the leaders exchange on `peer` with `tag`.
    #[pyo3(name = "Create_intercomm", signature = (local_leader, peer, remote_leader, tag = 0))]
    fn create_intercomm(
        &self,
        py: Python<'_>,
        local_leader: u32,
        peer: &Bound<'_, Comm>,
        remote_leader: u32,
        tag: u32,
    ) -> PyResult<Comm> {
        let peer_sub = peer.get().sub;
        let sub = self.sub;
        let (id, rank, size) = self.call(py, |r| {
            let ic = {
                let local = r.shared_comm(sub).ok_or(BindingError::IntercommComm)?;
                let peer = r.shared_comm(peer_sub).ok_or(BindingError::IntercommComm)?;
                local.create_intercomm(local_leader, peer, remote_leader, tag)?
            };
            Ok(r.add_sub(SubComm::Inter(Box::new(ic))))
        })?;
        Ok(self.child(id, rank, size))
    }

    /// The local and the remote group's job ranks, each in rank order.
    #[pyo3(name = "Inter_groups")]
    fn inter_groups(&self, py: Python<'_>) -> PyResult<(Vec<u32>, Vec<u32>)> {
        self.call(py, |r| {
            let ic = r.inter()?;
            Ok((ic.local_job_ranks(), ic.remote_job_ranks()))
        })
    }

    /// The intercommunicator's local communicator: the local group's
    /// calls (freed with the intercommunicator).
    #[pyo3(name = "Inter_local")]
    fn inter_local(&self, py: Python<'_>) -> PyResult<Comm> {
        let (id, rank, size) = self.call(py, |r| {
            let ic = r.inter()?;
            Ok((ic.local().id(), ic.rank(), ic.size()))
        })?;
        Ok(self.child(id, rank, size))
    }

    /// MPI's `Intercomm_merge`: one communicator of both groups, the group
    /// passing `high=False` first (the same flag: the group of the lower
    /// first job rank first).
    #[pyo3(name = "Merge", signature = (high = false))]
    fn merge(&self, py: Python<'_>, high: bool) -> PyResult<Comm> {
        let (id, rank, size) = self.call(py, |r| {
            let c = r.inter()?.merge(high)?;
            Ok(r.add_sub(SubComm::Shared(c)))
        })?;
        Ok(self.child(id, rank, size))
    }

    /// MPI's `Comm_dup` of an intercommunicator: the same groups, a new id.
    #[pyo3(name = "Inter_dup")]
    fn inter_dup(&self, py: Python<'_>) -> PyResult<Comm> {
        let (id, rank, size) = self.call(py, |r| {
            let ic = r.inter()?.dup()?;
            Ok(r.add_sub(SubComm::Inter(Box::new(ic))))
        })?;
        Ok(self.child(id, rank, size))
    }

    /// MPI's `Comm_split` of an intercommunicator: `None` for color
    /// `UNDEFINED` or a color no remote rank has.
    #[pyo3(name = "Inter_split", signature = (color = 0, key = 0))]
    fn inter_split(&self, py: Python<'_>, color: i64, key: i32) -> PyResult<Option<Comm>> {
        let color = match color {
            UNDEFINED => None,
            c => Some(u32::try_from(c).map_err(|_| BindingError::Color { got: c })?),
        };
        let made = self.call(py, |r| {
            let ic = r.inter()?.split(color, key)?;
            Ok(ic.map(|ic| r.add_sub(SubComm::Inter(Box::new(ic)))))
        })?;
        Ok(made.map(|(id, rank, size)| self.child(id, rank, size)))
    }

    /// The root's object on every rank of the other group; `None` in the
    /// root's group.
    #[pyo3(name = "Inter_bcast", signature = (obj, root))]
    fn inter_bcast_obj(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<Py<PyAny>> {
        let role = inter_root(root)?;
        let mut data = if role == InterRoot::Here {
            pickle(obj)?.as_bytes().to_vec()
        } else {
            Vec::new()
        };
        let data = self.call(py, move |r| {
            r.inter()?.bcast(role, &mut data)?;
            Ok(data)
        })?;
        match role {
            InterRoot::Remote(_) => unpickle(py, &data),
            _ => Ok(py.None()),
        }
    }

    /// The other group's objects, in its rank order, as a list at the
    /// root; `None` elsewhere.
    #[pyo3(name = "Inter_gather", signature = (obj, root))]
    fn inter_gather_obj(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<Py<PyAny>> {
        let role = inter_root(root)?;
        let data = match role {
            InterRoot::Remote(_) => pickle(obj)?.as_bytes().to_vec(),
            _ => Vec::new(),
        };
        let got = self.call(py, |r| Ok(r.inter()?.gatherv(role, &data)?))?;
        match got {
            Some(b) => unpickled_list(py, &b.data, &b.counts),
            None => Ok(py.None()),
        }
    }

    /// Item i of the root's `obj` (a sequence of remote size items) on
    /// remote rank i; `None` in the root's group. A root sequence of
    /// another length ends the job (ABORT reason 4, as an invalid
    /// scatter).
    #[pyo3(name = "Inter_scatter", signature = (obj, root))]
    fn inter_scatter_obj(
        &self,
        py: Python<'_>,
        obj: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<Py<PyAny>> {
        let role = inter_root(root)?;
        let items = match role {
            InterRoot::Here => Some(pickles(obj, self.size_u32())?),
            _ => None,
        };
        let mine = self.call(py, |r| {
            let items = match items {
                Some(Err(e)) => return Err(r.end_job(AbortReason::InvalidScatter, e)),
                Some(Ok(v)) => Some(v),
                None => None,
            };
            let counts: Vec<usize> = items.iter().flatten().map(Vec::len).collect();
            let data: Vec<u8> = items.iter().flatten().flatten().copied().collect();
            let here = role == InterRoot::Here;
            Ok(r.inter()?
                .scatterv(role, here.then_some((&data[..], &counts[..])))?)
        })?;
        match role {
            InterRoot::Remote(_) => unpickle(py, &mine),
            _ => Ok(py.None()),
        }
    }

    /// The other group's objects, in its rank order, as a list.
    #[pyo3(name = "Inter_allgather")]
    fn inter_allgather_obj(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let data = pickle(obj)?.as_bytes().to_vec();
        let b = self.call(py, |r| Ok(r.inter()?.allgatherv(&data)?))?;
        unpickled_list(py, &b.data, &b.counts)
    }

    /// Item j of `obj` (remote size items) to remote rank j; a list of one
    /// object from each remote rank, in rank order. Another number of
    /// items ends the job (ABORT reason 4).
    #[pyo3(name = "Inter_alltoall")]
    fn inter_alltoall_obj(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let items = pickles(Some(obj), self.size_u32())?;
        let b = self.call(py, |r| {
            let items = items.map_err(|e| r.end_job(AbortReason::InvalidScatter, e))?;
            let counts: Vec<usize> = items.iter().map(Vec::len).collect();
            let data: Vec<u8> = items.concat();
            Ok(r.inter()?.alltoallv(&data, &counts)?)
        })?;
        unpickled_list(py, &b.data, &b.counts)
    }
}
