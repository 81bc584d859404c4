//! ULFM's calls (mpi4py 4's `Comm.Revoke`, `Is_revoked`, `Agree`,
//! `Iagree`, `Shrink`, `Get_failed`, `Ack_failed`) over the Rust
//! `Comm::revoke` ... `Comm::ack_failed` and their `Intercomm` forms
//! (protocol §18.8.1).
//!
//! A revoked communicator's calls fail with `SperliError` code 1613 and
//! `check` `"revoked"` (the job goes on); agree, shrink, get_failed,
//! ack_failed and `Free` still work on it. `Iagree`'s request is the Rust
//! [`Agreement`], progressed by the request's `Test`/`Wait` (no thread
//! runs it): it does not complete before every member called `Iagree`.

use std::sync::Arc;

use pyo3::prelude::*;
use sperli_collective::agreement::Agreement;
use sperli_collective::{Endpoint, Intercomm};
use sperli_wire::Error;

use crate::buffer::Buf;
use crate::collectives::copy_result;
use crate::comm::Comm;
use crate::errors::Fail;
use crate::p2p::Request;
use crate::rank::{CommMut, Open, Pending, Rank, Shared, SubComm};

/// `inter` on the running call's intercommunicator, or `intra` on its
/// communicator of any other kind.
fn on<R>(
    r: &mut Rank,
    inter: impl FnOnce(&Intercomm<Shared>) -> R,
    intra: impl FnOnce(CommMut<'_>) -> R,
) -> R {
    let is_inter = matches!(
        r.selected.and_then(|id| r.subs.get(&id)),
        Some(SubComm::Inter(_))
    );
    if is_inter {
        if let Ok(ic) = r.inter() {
            return inter(ic);
        }
    }
    intra(r.comm())
}

/// A C int flag as ULFM's 32 bits, and back.
fn bits(flag: i32) -> u32 {
    u32::from_ne_bytes(flag.to_ne_bytes())
}

fn c_int(bits: u32) -> i32 {
    i32::from_ne_bytes(bits.to_ne_bytes())
}

/// An `Iagree` in progress: its result goes into the request's buffer.
struct AgreeRequest {
    agreement: Agreement<Arc<Endpoint>>,
    result: Option<u32>,
    delivered: bool,
}

impl Pending for AgreeRequest {
    fn poll(&mut self, block: bool, out: Option<&mut Buf>) -> Result<bool, Fail> {
        if self.delivered {
            return Ok(true);
        }
        if self.result.is_none() {
            let got = if block {
                Some(self.agreement.wait()?)
            } else {
                self.agreement.test()?
            };
            self.result = got.map(|v| (v & u64::from(u32::MAX)) as u32);
        }
        let Some(v) = self.result else {
            return Ok(false);
        };
        if let Some(b) = out {
            copy_result(b, &[c_int(v)])?;
        }
        self.delivered = true;
        Ok(true)
    }

    fn is_done(&self) -> bool {
        self.delivered || self.result.is_some()
    }

    fn ready(&mut self) -> Result<bool, Error> {
        if self.result.is_none() {
            self.result = self
                .agreement
                .test()?
                .map(|v| (v & u64::from(u32::MAX)) as u32);
        }
        Ok(self.is_done())
    }
}

/// `$body` with `$c` the Rust communicator of a [`CommMut`].
macro_rules! each {
    ($m:expr, $c:ident => $body:expr) => {
        match $m {
            CommMut::Ref($c) => $body,
            CommMut::Task($c) => $body,
        }
    };
}

#[pymethods]
impl Comm {
    /// Revokes this communicator (ULFM's `MPIX_Comm_revoke`, protocol
    /// §18.8.1): from now on its calls on this rank raise `SperliError`
    /// (code 1613, `check` `"revoked"`; the job goes on), except `Agree`,
    /// `Iagree`, `Shrink`, `Get_failed`, `Ack_failed` and `Free`.
    #[pyo3(name = "Revoke")]
    fn revoke(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, |r| {
            on(r, |ic| ic.revoke(), |m| each!(m, c => c.revoke()));
            Ok(())
        })
    }

    /// Raises the revoked error (code 1613, `check` `"revoked"`) if this
    /// communicator is revoked: the check of a call that completes without
    /// reaching the transport (a send to or receive from `PROC_NULL`).
    #[pyo3(name = "_check_revoked")]
    fn check_revoked(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, |r| r.live())
    }

    /// Whether this communicator is revoked on this rank.
    #[pyo3(name = "Is_revoked")]
    fn is_revoked(&self, py: Python<'_>) -> PyResult<bool> {
        self.call(py, |r| {
            Ok(on(
                r,
                |ic| ic.is_revoked(),
                |m| each!(m, c => c.is_revoked()),
            ))
        })
    }

    /// ULFM's agreement (`MPIX_Comm_agree`): the bitwise AND of every
    /// member's `flag` (a C int; of an intercommunicator, of the members
    /// of both groups), on every member. Runs on a revoked communicator.
    #[pyo3(name = "Agree")]
    fn agree(&self, py: Python<'_>, flag: i32) -> PyResult<i32> {
        let f = bits(flag);
        let v = self.call(py, move |r| {
            Ok(on(r, |ic| ic.agree(f), |m| each!(m, c => c.agree(f)))?)
        })?;
        Ok(c_int(v))
    }

    /// Starts an agreement of `flag` (as `Agree`); its result (a C int) is
    /// written into `buf` (one int32) when the request completes, which is
    /// not before every member called `Iagree`.
    #[pyo3(name = "Iagree")]
    fn iagree(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, flag: i32) -> PyResult<Request> {
        let recv = Buf::recv(buf, "flag")?;
        let f = bits(flag);
        self.issue(py, Some(recv), None, move |r, _| {
            let agreement = on(r, |ic| ic.iagree(f), |m| each!(m, c => c.iagree(f)))?;
            Ok(Open::Coll(Box::new(AgreeRequest {
                agreement,
                result: None,
                delivered: false,
            })))
        })
    }

    /// ULFM's shrink (`MPIX_Comm_shrink`): a new communicator of the
    /// members that have not failed, in their order (of an
    /// intercommunicator: a new intercommunicator of both groups'
    /// survivors). Runs on a revoked communicator.
    #[pyo3(name = "Shrink")]
    fn shrink(&self, py: Python<'_>) -> PyResult<Comm> {
        let (id, rank, size) = self.call(py, |r| {
            let sub = on(
                r,
                |ic| ic.shrink().map(|s| SubComm::Inter(Box::new(s))),
                |m| match m {
                    CommMut::Ref(c) => c.shrink().map(SubComm::Shared),
                    CommMut::Task(c) => c.shrink().map(SubComm::Task),
                },
            )?;
            Ok(r.add_sub(sub))
        })?;
        Ok(self.child(id, rank, size))
    }

    /// The ranks of this communicator (of an intercommunicator: of the
    /// remote group) that failed, ascending (ULFM's `MPIX_Comm_get_failed`).
    #[pyo3(name = "Get_failed")]
    fn get_failed(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        self.call(py, |r| {
            Ok(on(
                r,
                |ic| ic.get_failed(),
                |m| each!(m, c => c.get_failed()),
            ))
        })
    }

    /// Acknowledges the first `num_to_ack` failed members (ULFM's
    /// `MPIX_Comm_ack_failed`); returns how many are acknowledged now.
    #[pyo3(name = "Ack_failed")]
    fn ack_failed(&self, py: Python<'_>, num_to_ack: u32) -> PyResult<u32> {
        self.call(py, move |r| {
            Ok(on(
                r,
                |ic| ic.ack_failed(num_to_ack),
                |m| each!(m, c => c.ack_failed(num_to_ack)),
            ))
        })
    }
}
