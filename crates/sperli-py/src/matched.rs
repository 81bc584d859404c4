//! Matched probes (MPI's `MPI_Mprobe`, `MPI_Improbe`, `MPI_Mrecv`,
//! `MPI_Imrecv`; protocol §16.3): a probe that takes the message for one
//! later receive, which no other receive or probe sees. The message is an
//! open receive of the rank (its id); `_imrecv` turns it into a `Request`
//! that delivers into a buffer or unpickles an object. `sperli.MPI`'s
//! `Message` is built on these.

use pyo3::prelude::*;
use sperli_transport::Status as WireStatus;

use crate::buffer::Buf;
use crate::comm::Comm;
use crate::errors::Fail;
use crate::p2p::{fill, recv_tag, source_arg, Kind, Request, Status, ANY_SOURCE, ANY_TAG};
use crate::rank::{Open, Rank};

/// Claims the first message matching `source` and `tag` (the running
/// call's ranks; `wait`: until there is one) as a new open receive: its id
/// and its status in the communicator's ranks.
fn claim(
    r: &mut Rank,
    source: Option<u32>,
    tag: Option<u32>,
    wait: bool,
) -> Result<Option<(u64, WireStatus)>, Fail> {
    let src = r.source_to_job(source)?;
    let comm = r.wire().unwrap_or(0);
    let ep = r.handles_ep()?.clone();
    let got = if wait {
        Some(ep.mprobe_on_owned(comm, src, tag)?)
    } else {
        ep.improbe_on_owned(comm, src, tag)?
    };
    Ok(got.map(|(st, h)| {
        let st = r.local_status(st);
        (r.add_open(Open::Recv(h)), st)
    }))
}

#[pymethods]
impl Comm {
    /// MPI's `MPI_Improbe`: the id of the matching message now taken for a
    /// later `_imrecv` (its status filled), or `None` when there is none.
    #[pyo3(signature = (source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn _improbe(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<Option<u64>> {
        let (source, tag) = (source_arg(source)?, recv_tag(tag)?);
        let got = self.call(py, |r| claim(r, source, tag, false))?;
        Ok(got.map(|(id, st)| {
            fill(status, &st);
            id
        }))
    }

    /// MPI's `MPI_Mprobe`: as `_improbe`, waiting for a message.
    #[pyo3(signature = (source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn _mprobe(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<u64> {
        let (source, tag) = (source_arg(source)?, recv_tag(tag)?);
        // A waiting claim always finds one (or fails).
        let got = self.call(py, |r| claim(r, source, tag, true))?;
        let Some((id, st)) = got else {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "Mprobe ended without a message",
            ));
        };
        fill(status, &st);
        Ok(id)
    }

    /// MPI's `MPI_Imrecv` of message `id` (from `_mprobe`/`_improbe`):
    /// a request that delivers it into `buf`, or (`buf` None) unpickles
    /// it as an object.
    #[pyo3(signature = (id, buf = None))]
    fn _imrecv(&self, id: u64, buf: Option<&Bound<'_, PyAny>>) -> PyResult<Request> {
        let kind = match buf {
            Some(b) => Kind::RecvBuf(Buf::recv(b, "buf")?),
            None => Kind::RecvObj,
        };
        Ok(self.request(id, kind))
    }
}
