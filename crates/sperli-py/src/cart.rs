//! Cartesian topologies for `sperli.MPI` (mpi4py's `Create_cart`,
//! `Cartcomm`): sperli-collective's [`sperli_collective::cart`].
//!
//! A Cartesian communicator is a sub-communicator of the rank (as one of
//! `Split`) whose grid the Python side keeps (`_mpi/topo.py`); the local
//! calls (coordinates, ranks, shifts, `Dims_create`) are functions of the
//! grid here, [`Grid`]'s. A misuse (H1618) raises `ArgumentError` before
//! anything is sent; the job goes on.

use pyo3::prelude::*;
use sperli_collective::cart::{dims_create, Grid};
use sperli_collective::MpiError;

use crate::comm::Comm;
use crate::errors::Fail;

/// A Python exception for a misuse of a topology call.
fn raise(py: Python<'_>, e: MpiError) -> PyErr {
    Fail::from(e).into_pyerr(py)
}

/// The grid of `dims` and `periods`, or the exception.
fn grid(py: Python<'_>, dims: &[u32], periods: &[bool]) -> PyResult<Grid> {
    Grid::new(dims, periods).map_err(|e| raise(py, e))
}

/// `f` of the grid of `dims` and `periods`; a misuse is the exception.
fn on_grid<R>(
    py: Python<'_>,
    dims: &[u32],
    periods: &[bool],
    f: impl FnOnce(&Grid) -> Result<R, MpiError>,
) -> PyResult<R> {
    grid(py, dims, periods).and_then(|g| f(&g).map_err(|e| raise(py, e)))
}

#[pymethods]
impl Comm {
    /// A Cartesian grid of extents `dims` (periodic where `periods` says)
    /// on this communicator's first ranks (`MPI_Cart_create`; collective):
    /// a new communicator of the grid's places, in this communicator's
    /// order (`reorder` is allowed to be ignored and is); `None` on the
    /// ranks beyond them. A `Split` underneath (HELLO feature bit 2).
    #[pyo3(name = "Create_cart", signature = (dims, periods, reorder = false))]
    fn create_cart(
        &self,
        py: Python<'_>,
        dims: Vec<u32>,
        periods: Vec<bool>,
        reorder: bool,
    ) -> PyResult<Option<Comm>> {
        let made = self.call(py, |r| {
            let sub = r.comm().cart_create(&dims, &periods, reorder)?;
            Ok(sub.map(|s| r.add_sub(s)))
        })?;
        Ok(made.map(|(id, rank, size)| self.child(id, rank, size)))
    }

    /// This rank's sub-grid that keeps the dimensions where `remain_dims`
    /// is true, of the grid `dims`/`periods` this communicator is
    /// (`MPI_Cart_sub`; collective): the communicator of the ranks that
    /// share this rank's coordinates in the dropped dimensions.
    #[pyo3(name = "Cart_sub")]
    fn cart_sub(
        &self,
        py: Python<'_>,
        dims: Vec<u32>,
        periods: Vec<bool>,
        remain_dims: Vec<bool>,
    ) -> PyResult<Comm> {
        let (color, _) = on_grid(py, &dims, &periods, |g| {
            g.sub(self.rank_u32(), &remain_dims)
        })?;
        let key = self.rank_u32() as i32;
        let (id, rank, size) = self.call(py, |r| {
            let sub = r.comm().split(Some(color), key)?;
            let sub = sub.ok_or(MpiError::Comm(sperli_wire::Error::Local(
                sperli_wire::error::LocalError::Internal {
                    what: "a split with a color gives a communicator",
                },
            )))?;
            Ok(r.add_sub(sub))
        })?;
        Ok(self.child(id, rank, size))
    }
}

/// `MPI_Cart_coords`: the coordinates of place `rank` of the grid.
#[pyfunction]
fn cart_coords(
    py: Python<'_>,
    dims: Vec<u32>,
    periods: Vec<bool>,
    rank: u32,
) -> PyResult<Vec<u32>> {
    on_grid(py, &dims, &periods, |g| g.coords(rank))
}

/// `MPI_Cart_rank`: the place at `coords` (periodic dimensions wrap).
#[pyfunction]
fn cart_rank(
    py: Python<'_>,
    dims: Vec<u32>,
    periods: Vec<bool>,
    coords: Vec<i64>,
) -> PyResult<u32> {
    on_grid(py, &dims, &periods, |g| g.cart_rank(&coords))
}

/// `MPI_Cart_shift` of place `rank`: `(source, dest)`, `None` past the
/// edge of a non-periodic dimension.
#[pyfunction]
fn cart_shift(
    py: Python<'_>,
    dims: Vec<u32>,
    periods: Vec<bool>,
    rank: u32,
    direction: usize,
    disp: i32,
) -> PyResult<(Option<u32>, Option<u32>)> {
    let (src, dst) = on_grid(py, &dims, &periods, |g| g.shift(rank, direction, disp))?;
    let real = |r| (r != sperli_collective::PROC_NULL).then_some(r);
    Ok((real(src), real(dst)))
}

/// `MPI_Cart_sub`'s grid: the extents and periods of the kept dimensions.
#[pyfunction]
fn cart_sub_grid(
    py: Python<'_>,
    dims: Vec<u32>,
    periods: Vec<bool>,
    remain_dims: Vec<bool>,
) -> PyResult<(Vec<u32>, Vec<bool>)> {
    // Place 0 has every sub-grid's shape.
    let (_, sub) = on_grid(py, &dims, &periods, |g| g.sub(0, &remain_dims))?;
    Ok((sub.dims().to_vec(), sub.periods().to_vec()))
}

/// `MPI_Dims_create`: `dims` with its zero entries filled by a balanced
/// factorisation of `nnodes`.
#[pyfunction(name = "dims_create")]
fn dims_create_py(py: Python<'_>, nnodes: u32, dims: Vec<u32>) -> PyResult<Vec<u32>> {
    let mut dims = dims;
    dims_create(nnodes, &mut dims).map_err(|e| raise(py, e))?;
    Ok(dims)
}

/// Adds the functions to the module `sperli._sperli`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cart_coords, m)?)?;
    m.add_function(wrap_pyfunction!(cart_rank, m)?)?;
    m.add_function(wrap_pyfunction!(cart_shift, m)?)?;
    m.add_function(wrap_pyfunction!(cart_sub_grid, m)?)?;
    m.add_function(wrap_pyfunction!(dims_create_py, m)?)?;
    Ok(())
}
