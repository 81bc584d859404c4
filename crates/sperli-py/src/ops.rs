//! `sperli.SUM`, `sperli.MAX`, ... (the ten reductions of protocol §8.3) and
//! `sperli.IN_PLACE`.

use pyo3::prelude::*;
use sperli_collective::Reduction;

use crate::buffer::type_name;
use crate::errors::BindingError;

/// A reduction: `sperli.SUM`, `PROD`, `MIN`, `MAX`, `LAND`, `LOR`, `LXOR`,
/// `BAND`, `BOR`, `BXOR`. Which element types each takes is the table of
/// protocol §8.3 (e.g. no `SUM` on uint8, no bitwise ones on floats: H1618).
#[pyclass(module = "sperli", frozen, eq)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub(crate) reduction: Reduction,
}

#[pymethods]
impl Op {
    /// Its name, e.g. `"SUM"`.
    #[getter]
    fn name(&self) -> String {
        self.reduction.name().to_uppercase()
    }

    /// Its wire code (1..=10).
    #[getter]
    fn code(&self) -> u8 {
        self.reduction.code()
    }

    fn __repr__(&self) -> String {
        format!("sperli.{}", self.name())
    }

    fn __hash__(&self) -> u64 {
        u64::from(self.reduction.code())
    }
}

/// The reduction an `op` argument names.
pub(crate) fn op_arg(op: &Bound<'_, PyAny>) -> Result<Reduction, BindingError> {
    op.cast::<Op>()
        .map(|o| o.get().reduction)
        .map_err(|_| BindingError::Op {
            type_name: type_name(op),
        })
}

/// `sperli.IN_PLACE`: the send buffer of `Allreduce`, `Reduce` (root),
/// `Gather` (root), `Allgather`, or the receive buffer of `Scatter`
/// (root), meaning "the data is already in the other buffer".
#[pyclass(module = "sperli", frozen)]
pub struct InPlace;

#[pymethods]
impl InPlace {
    fn __repr__(&self) -> &'static str {
        "sperli.IN_PLACE"
    }
}

/// Whether `obj` is `sperli.IN_PLACE`.
pub(crate) fn is_in_place(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<InPlace>()
}

/// Adds the reductions and `IN_PLACE` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Op>()?;
    m.add_class::<InPlace>()?;
    // The ten of protocol §8.3 and MINLOC, MAXLOC (§17.2, on value-index
    // pair buffers). A user-defined reduction needs a function (§17.4):
    // not offered here.
    for r in Reduction::ALL.into_iter().filter(|r| *r != Reduction::User) {
        m.add(r.name().to_uppercase().as_str(), Op { reduction: r })?;
    }
    m.add("IN_PLACE", InPlace)?;
    Ok(())
}
