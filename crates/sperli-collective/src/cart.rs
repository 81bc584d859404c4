//! Cartesian topologies (MPI's `MPI_Cart_create` and its calls): a
//! [`Cartcomm`] is a communicator whose ranks are the places of a grid,
//! numbered in row-major order (the last dimension varies fastest, as in
//! MPI), each dimension periodic (a ring) or not.
//!
//! [`Comm::cart_create`] and [`Cartcomm::sub`] are collectives, made by
//! [`Comm::split`] (HELLO feature bit 2, protocol §15.3); everything else
//! here is local: [`dims_create`], [`Cartcomm::coords`],
//! [`Cartcomm::cart_rank`], [`Cartcomm::shift`].

use std::ops::Deref;

use crate::comm::Comm;
use crate::mpi_error::MpiError;
use crate::peers::Peers;
use crate::special::PROC_NULL;

/// A communicator with a Cartesian grid on its ranks ([`Comm::cart_create`]).
/// Every call of [`Comm`] works on it ([`Deref`]).
///
/// ```
/// use sperli_collective::fake;
/// use sperli_collective::prelude::*;
/// let out = fake::run(4, |c| {
///     let grid = c.cart_create(&[2, 2], &[true, false], false).unwrap().unwrap();
///     let (src, dst) = grid.shift(1, 1).unwrap(); // along the non-periodic dimension
///     let sum = grid.allreduce_scalar(1u32, Reduction::Sum).unwrap();
///     (grid.coords(grid.rank()).unwrap(), src, dst, sum)
/// });
/// assert_eq!(out[0], (vec![0, 0], PROC_NULL, 1, 4));
/// assert_eq!(out[3], (vec![1, 1], 2, PROC_NULL, 4));
/// ```
#[derive(Debug)]
pub struct Cartcomm<L: Peers> {
    comm: Comm<L>,
    grid: Grid,
}

/// The grid of a [`Cartcomm`] without its communicator: extents and
/// periods, and the local calls on them (a binding keeps it beside a
/// communicator of its own). Its places are `0..` the product of the
/// extents, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    dims: Vec<u32>,
    periods: Vec<bool>,
}

impl<L: Peers> Deref for Cartcomm<L> {
    type Target = Comm<L>;

    fn deref(&self) -> &Comm<L> {
        &self.comm
    }
}

/// The product of `dims`, and [`MpiError::GridSize`] when an extent is 0
/// or the product is above `size`.
fn places(dims: &[u32], size: u32) -> Result<u64, MpiError> {
    let mut p: u64 = 1;
    for &d in dims {
        p = p.saturating_mul(u64::from(d));
    }
    if dims.contains(&0) || p > u64::from(size) {
        return Err(MpiError::GridSize { places: p, size });
    }
    Ok(p)
}

/// Fills the zero entries of `dims` with a balanced factorisation of
/// `nnodes` over them (MPI's `MPI_Dims_create`): the product of all
/// entries becomes `nnodes`, the filled entries are as close to each other
/// as they can be (the smallest difference between the largest and the
/// smallest, then the smallest largest) and in non-increasing order; the
/// non-zero entries stay. When the non-zero entries' product does not
/// divide `nnodes` (or, without a zero entry, is not `nnodes`):
/// [`MpiError::Indivisible`], `dims` unchanged. Local.
///
/// ```
/// use sperli_collective::cart::dims_create;
/// // The examples of the MPI standard's `MPI_Dims_create`.
/// let mut d = [0, 0];
/// dims_create(6, &mut d).unwrap();
/// assert_eq!(d, [3, 2]);
/// let mut d = [0, 0, 0];
/// dims_create(7, &mut d).unwrap();
/// assert_eq!(d, [7, 1, 1]);
/// let mut d = [0, 3, 0];
/// dims_create(6, &mut d).unwrap();
/// assert_eq!(d, [2, 3, 1]);
/// let mut d = [0, 3, 0];
/// assert!(dims_create(7, &mut d).is_err());
/// ```
pub fn dims_create(nnodes: u32, dims: &mut [u32]) -> Result<(), MpiError> {
    let fixed: u64 = dims
        .iter()
        .filter(|&&d| d != 0)
        .map(|&d| u64::from(d))
        .product();
    let free = dims.iter().filter(|&&d| d == 0).count();
    let n = u64::from(nnodes);
    let fits = if free == 0 {
        fixed == n
    } else {
        n > 0 && n % fixed == 0
    };
    if !fits {
        return Err(MpiError::Indivisible { nnodes, fixed });
    }
    if free == 0 {
        return Ok(());
    }
    let m = n / fixed;
    let divisors: Vec<u64> = (1..=m)
        .take_while(|d| d * d <= m)
        .filter(|d| m % d == 0)
        .collect();
    let mut all: Vec<u64> = divisors.iter().flat_map(|&d| [d, m / d]).collect();
    all.sort_unstable();
    all.dedup();
    let mut best: Option<Vec<u64>> = None;
    balanced(m, free, m, &all, &mut Vec::new(), &mut best);
    let mut filled = best.unwrap_or_default().into_iter();
    for d in dims.iter_mut().filter(|d| **d == 0) {
        // Each factor divides nnodes, so it fits a u32.
        *d = filled.next().map_or(1, |f| f as u32);
    }
    Ok(())
}

/// The score of a non-increasing factorisation: its spread, then its
/// largest factor (smaller is better).
fn score(f: &[u64]) -> (u64, u64) {
    (f[0] - f[f.len() - 1], f[0])
}

/// Searches the non-increasing factorisations of `m` into `k` factors of
/// at most `hi` (from `divisors`, every divisor of the original number, in
/// ascending order) after the factors of `prefix`, keeping the best.
fn balanced(
    m: u64,
    k: usize,
    hi: u64,
    divisors: &[u64],
    prefix: &mut Vec<u64>,
    best: &mut Option<Vec<u64>>,
) {
    if k == 1 {
        if m <= hi {
            prefix.push(m);
            if best.as_ref().is_none_or(|b| score(prefix) < score(b)) {
                *best = Some(prefix.clone());
            }
            prefix.pop();
        }
        return;
    }
    for &d in divisors.iter().rev() {
        if d > hi || m % d != 0 {
            continue;
        }
        // Non-increasing: the k factors from here are at most d each.
        if (d as u128).pow(k as u32) < u128::from(m) {
            break;
        }
        // Bound: the spread is at least (first factor - d).
        if let (Some(b), Some(&first)) = (best.as_ref(), prefix.first()) {
            if first - d > score(b).0 {
                continue;
            }
        }
        prefix.push(d);
        balanced(m / d, k - 1, d, divisors, prefix, best);
        prefix.pop();
    }
}

impl<L: Peers> Comm<L> {
    /// A Cartesian grid of extents `dims` (periodic where `periods` says)
    /// on this communicator's first `dims`' product ranks (MPI's
    /// `MPI_Cart_create`): a collective over this communicator; `Ok(None)`
    /// on the ranks beyond the product. Ranks keep their order (`reorder`
    /// is allowed to be ignored, as MPI allows, and is). A [`Comm::split`]
    /// with its one allgather and errors (HELLO feature bit 2, protocol
    /// §15.3). `dims` and `periods` of different lengths
    /// ([`MpiError::Dimensions`]), an extent 0 or a product above the size
    /// ([`MpiError::GridSize`]) are refused on every rank before anything
    /// is sent.
    pub fn cart_create(
        &self,
        dims: &[u32],
        periods: &[bool],
        reorder: bool,
    ) -> Result<Option<Cartcomm<L>>, MpiError> {
        let _ = reorder;
        // A grid's own check knows no size: an extent 0 names this one's.
        let grid = Grid::new(dims, periods).map_err(|e| match e {
            MpiError::GridSize { places, .. } => MpiError::GridSize {
                places,
                size: self.size(),
            },
            e => e,
        })?;
        let n = places(dims, self.size())?;
        let inside = u64::from(self.rank()) < n;
        let sub = self.split(inside.then_some(0), self.rank() as i32)?;
        Ok(sub.map(|comm| Cartcomm { comm, grid }))
    }
}

impl<L: Peers> Cartcomm<L> {
    /// The extents (MPI's `MPI_Cart_get` dims).
    pub fn dims(&self) -> &[u32] {
        &self.grid.dims
    }

    /// Which dimensions are periodic.
    pub fn periods(&self) -> &[bool] {
        &self.grid.periods
    }

    /// The number of dimensions (MPI's `MPI_Cartdim_get`).
    pub fn ndims(&self) -> usize {
        self.grid.dims.len()
    }

    /// The grid without the communicator.
    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// The communicator underneath.
    pub fn into_comm(self) -> Comm<L> {
        self.comm
    }

    /// The coordinates of rank `rank` ([`Grid::coords`]).
    pub fn coords(&self, rank: u32) -> Result<Vec<u32>, MpiError> {
        self.grid.coords(rank)
    }

    /// The rank at `coords` ([`Grid::cart_rank`]).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let out = fake::run(6, |c| {
    ///     let g = c.cart_create(&[2, 3], &[false, true], false).unwrap().unwrap();
    ///     (g.cart_rank(&[1, -1]).unwrap(), g.cart_rank(&[0, 4]).unwrap(), g.cart_rank(&[2, 0]).is_err())
    /// });
    /// assert_eq!(out[0], (5, 1, true));
    /// ```
    pub fn cart_rank(&self, coords: &[i64]) -> Result<u32, MpiError> {
        self.grid.cart_rank(coords)
    }

    /// The neighbours of this rank `disp` places along dimension
    /// `direction` ([`Grid::shift`]).
    pub fn shift(&self, direction: usize, disp: i32) -> Result<(u32, u32), MpiError> {
        self.grid.shift(self.rank(), direction, disp)
    }

    /// The sub-grids that keep the dimensions where `remain_dims` is true
    /// (MPI's `MPI_Cart_sub`): a collective over this communicator; each
    /// rank gets the grid of the ranks that share its coordinates in the
    /// dropped dimensions, ranked row-major in the kept ones (with no
    /// dimension kept, a grid of this rank alone). A [`Comm::split`] with
    /// its allgather and errors; a `remain_dims` of another length than the
    /// dimensions is [`MpiError::Dimensions`] before anything is sent.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_collective::prelude::*;
    /// let out = fake::run(6, |c| {
    ///     let g = c.cart_create(&[2, 3], &[false, false], false).unwrap().unwrap();
    ///     let row = g.sub(&[false, true]).unwrap(); // the 3 ranks of a row
    ///     (row.dims().to_vec(), row.rank(), row.allreduce_scalar(c.rank(), Reduction::Sum).unwrap())
    /// });
    /// assert_eq!(out[4], (vec![3], 1, 3 + 4 + 5));
    /// assert_eq!(out[0], (vec![3], 0, 0 + 1 + 2));
    /// ```
    pub fn sub(&self, remain_dims: &[bool]) -> Result<Cartcomm<L>, MpiError> {
        let (color, grid) = self.grid.sub(self.rank(), remain_dims)?;
        let comm = self
            .comm
            .split(Some(color), self.rank() as i32)?
            .ok_or(MpiError::Comm(sperli_wire::Error::Local(
                sperli_wire::error::LocalError::Internal {
                    what: "a split with a color gives a communicator",
                },
            )))?;
        Ok(Cartcomm { comm, grid })
    }
}

impl Grid {
    /// The grid of extents `dims`, periodic where `periods` says;
    /// [`MpiError::Dimensions`] when their lengths differ, and
    /// [`MpiError::GridSize`] for an extent 0.
    pub fn new(dims: &[u32], periods: &[bool]) -> Result<Self, MpiError> {
        if dims.len() != periods.len() {
            return Err(MpiError::Dimensions {
                expected: dims.len(),
                got: periods.len(),
            });
        }
        places(dims, u32::MAX)?;
        Ok(Grid {
            dims: dims.to_vec(),
            periods: periods.to_vec(),
        })
    }

    /// The extents.
    pub fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// Which dimensions are periodic.
    pub fn periods(&self) -> &[bool] {
        &self.periods
    }

    /// The number of places (the product of the extents).
    pub fn size(&self) -> u32 {
        self.dims.iter().product()
    }

    /// The coordinates of place `rank` (MPI's `MPI_Cart_coords`),
    /// row-major. A rank not below [`Grid::size`] is [`MpiError::Rank`].
    pub fn coords(&self, rank: u32) -> Result<Vec<u32>, MpiError> {
        if rank >= self.size() {
            return Err(MpiError::Rank {
                rank,
                size: self.size(),
            });
        }
        let mut r = rank;
        let mut c = vec![0; self.dims.len()];
        for (i, &d) in self.dims.iter().enumerate().rev() {
            c[i] = r % d;
            r /= d;
        }
        Ok(c)
    }

    /// The place at `coords` (MPI's `MPI_Cart_rank`): a coordinate outside
    /// a periodic dimension wraps around; outside a non-periodic one it is
    /// [`MpiError::Coordinate`]; the wrong number of coordinates is
    /// [`MpiError::Dimensions`].
    pub fn cart_rank(&self, coords: &[i64]) -> Result<u32, MpiError> {
        if coords.len() != self.dims.len() {
            return Err(MpiError::Dimensions {
                expected: self.dims.len(),
                got: coords.len(),
            });
        }
        let mut r: u64 = 0;
        for (dim, (&c, (&d, &p))) in coords
            .iter()
            .zip(self.dims.iter().zip(&self.periods))
            .enumerate()
        {
            let e = i64::from(d);
            let c = if p {
                c.rem_euclid(e)
            } else if (0..e).contains(&c) {
                c
            } else {
                return Err(MpiError::Coordinate {
                    dim,
                    coord: c,
                    extent: d,
                });
            };
            r = r * u64::from(d) + c as u64;
        }
        Ok(r as u32)
    }

    /// The neighbours of place `rank` `disp` places along dimension
    /// `direction` (MPI's `MPI_Cart_shift`): `(source, dest)`, the places
    /// at `-disp` and `+disp`; [`PROC_NULL`] for a place past the edge of
    /// a non-periodic dimension. A direction not below the number of
    /// dimensions is [`MpiError::Direction`].
    pub fn shift(&self, rank: u32, direction: usize, disp: i32) -> Result<(u32, u32), MpiError> {
        if direction >= self.dims.len() {
            return Err(MpiError::Direction {
                direction,
                ndims: self.dims.len(),
            });
        }
        let me: Vec<i64> = self.coords(rank)?.into_iter().map(i64::from).collect();
        let at = |step: i64| -> Result<u32, MpiError> {
            let mut c = me.clone();
            c[direction] += step;
            let e = i64::from(self.dims[direction]);
            if !self.periods[direction] && !(0..e).contains(&c[direction]) {
                return Ok(PROC_NULL);
            }
            self.cart_rank(&c)
        };
        Ok((at(-i64::from(disp))?, at(i64::from(disp))?))
    }

    /// Place `rank`'s part of MPI's `MPI_Cart_sub`: the color of its
    /// sub-grid (its place in the grid of the dropped dimensions; the
    /// split key is its rank) and the sub-grid of the kept dimensions. A
    /// `remain_dims` of another length than the dimensions is
    /// [`MpiError::Dimensions`].
    pub fn sub(&self, rank: u32, remain_dims: &[bool]) -> Result<(u32, Grid), MpiError> {
        if remain_dims.len() != self.dims.len() {
            return Err(MpiError::Dimensions {
                expected: self.dims.len(),
                got: remain_dims.len(),
            });
        }
        let me = self.coords(rank)?;
        let mut color: u32 = 0;
        for ((&c, &d), _) in me
            .iter()
            .zip(&self.dims)
            .zip(remain_dims)
            .filter(|(_, &keep)| !keep)
        {
            color = color * d + c;
        }
        let keep = |v: &[bool]| -> Vec<bool> {
            v.iter()
                .zip(remain_dims)
                .filter(|(_, &k)| k)
                .map(|(&x, _)| x)
                .collect()
        };
        let dims = self
            .dims
            .iter()
            .zip(remain_dims)
            .filter(|(_, &k)| k)
            .map(|(&d, _)| d)
            .collect();
        Ok((
            color,
            Grid {
                dims,
                periods: keep(&self.periods),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(n: u32, dims: &[u32]) -> Vec<u32> {
        let mut d = dims.to_vec();
        dims_create(n, &mut d).unwrap();
        d
    }

    /// Every non-increasing factorisation of `m` into `k` factors.
    fn all_factorisations(m: u64, k: usize, hi: u64) -> Vec<Vec<u64>> {
        if k == 0 {
            return if m == 1 { vec![vec![]] } else { vec![] };
        }
        let mut out = Vec::new();
        for d in (1..=hi.min(m)).rev() {
            if m % d == 0 {
                for mut rest in all_factorisations(m / d, k - 1, d) {
                    rest.insert(0, d);
                    out.push(rest);
                }
            }
        }
        out
    }

    #[test]
    fn dims_create_gives_the_mpi_standard_examples_and_known_balances() {
        assert_eq!(filled(6, &[0, 0]), [3, 2]);
        assert_eq!(filled(7, &[0, 0, 0]), [7, 1, 1]);
        assert_eq!(filled(6, &[0, 3, 0]), [2, 3, 1]);
        assert_eq!(filled(16, &[0, 0, 0]), [4, 2, 2]);
        assert_eq!(filled(24, &[0, 0, 0]), [4, 3, 2]);
        assert_eq!(filled(36, &[0, 0, 0]), [4, 3, 3]);
        assert_eq!(filled(4096, &[0, 0, 0]), [16, 16, 16]);
        assert_eq!(filled(1, &[0, 0]), [1, 1]);
        assert_eq!(filled(12, &[2, 0, 3]), [2, 2, 3]);
        assert!(dims_create(5, &mut []).is_err());
        assert!(dims_create(1, &mut []).is_ok());
        let mut d = [0, 3, 0];
        assert_eq!(
            dims_create(7, &mut d),
            Err(MpiError::Indivisible {
                nnodes: 7,
                fixed: 3
            })
        );
        assert_eq!(d, [0, 3, 0]);
        assert!(dims_create(0, &mut [0, 0]).is_err());
        assert!(dims_create(6, &mut [2, 2]).is_err());
        assert!(dims_create(4, &mut [2, 2]).is_ok());
    }

    #[test]
    fn a_grid_alone_gives_what_its_communicator_would() {
        assert_eq!(
            Grid::new(&[2, 3], &[true]),
            Err(MpiError::Dimensions {
                expected: 2,
                got: 1
            })
        );
        assert!(matches!(
            Grid::new(&[2, 0], &[true, true]),
            Err(MpiError::GridSize { .. })
        ));
        let g = Grid::new(&[2, 3], &[false, true]).unwrap();
        assert_eq!(g.size(), 6);
        assert_eq!(g.coords(5).unwrap(), [1, 2]);
        assert!(g.coords(6).is_err());
        assert_eq!(g.shift(3, 0, 1).unwrap(), (0, PROC_NULL));
        assert_eq!(g.shift(3, 1, 1).unwrap(), (5, 4));
        assert_eq!(g.cart_rank(&[1, 3]).unwrap(), 3);
        // Place 4 (1, 1): keeping dimension 1 leaves the row of color 1.
        let (color, row) = g.sub(4, &[false, true]).unwrap();
        assert_eq!(
            (color, row.dims(), row.periods()),
            (1, &[3][..], &[true][..])
        );
        let (color, col) = g.sub(4, &[true, false]).unwrap();
        assert_eq!((color, col.dims()), (1, &[2][..]));
        assert!(g.sub(4, &[true]).is_err());
        // No dimension: one place.
        let none = Grid::new(&[], &[]).unwrap();
        assert_eq!((none.size(), none.cart_rank(&[]).unwrap()), (1, 0));
    }

    #[test]
    fn dims_create_is_the_most_balanced_factorisation() {
        for n in 1..=240u32 {
            for k in 1..=4usize {
                let got: Vec<u64> = filled(n, &vec![0; k]).into_iter().map(u64::from).collect();
                assert_eq!(got.iter().product::<u64>(), u64::from(n));
                assert!(got.windows(2).all(|w| w[0] >= w[1]), "{n} {k}: {got:?}");
                let best = all_factorisations(u64::from(n), k, u64::from(n))
                    .into_iter()
                    .map(|f| score(&f))
                    .min()
                    .unwrap();
                assert_eq!(score(&got), best, "{n} over {k}: {got:?}");
            }
        }
    }
}
