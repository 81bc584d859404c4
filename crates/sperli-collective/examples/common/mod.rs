//! What the two example programs share: the block partition of a 1-D
//! grid, the halo exchange with the neighbours (typed point-to-point on
//! the communicator), and reading arguments.

use std::process::ExitCode;

use sperli_collective::prelude::*;

/// DATA tag of a value sent to the left neighbour.
const TO_LEFT: u32 = 1;
/// DATA tag of a value sent to the right neighbour.
const TO_RIGHT: u32 = 2;

/// Rank `rank`'s block of `n` points over `size` ranks: (first index,
/// number of points); the first `n % size` ranks have one more.
pub fn block(n: usize, size: usize, rank: usize) -> (usize, usize) {
    let (q, r) = (n / size, n % size);
    let len = q + usize::from(rank < r);
    (rank * q + rank.min(r), len)
}

/// Sends this rank's first value to the left neighbour and its last to
/// the right one, and returns (left ghost, right ghost): the neighbours'
/// values, or 0.0 at the ends of the grid (the boundary condition). The
/// receives are posted first, as an MPI halo exchange does
/// (`MPI_Irecv`, `MPI_Send`, `MPI_Wait`).
pub fn halo(comm: &Comm<Endpoint>, u: &[f64]) -> Result<(f64, f64), Error> {
    let (rank, size) = (comm.rank(), comm.size());
    let from_left = (rank > 0)
        .then(|| comm.irecv::<f64>(Some(rank - 1), Some(TO_RIGHT)))
        .transpose()?;
    let from_right = (rank + 1 < size)
        .then(|| comm.irecv::<f64>(Some(rank + 1), Some(TO_LEFT)))
        .transpose()?;
    if rank > 0 {
        comm.send(rank - 1, TO_LEFT, &u[..1])?;
    }
    if rank + 1 < size {
        comm.send(rank + 1, TO_RIGHT, &u[u.len() - 1..])?;
    }
    let ghost = |r: Option<RecvRequest<'_, f64>>| -> Result<f64, Error> {
        match r {
            // A neighbour of this program sends one value; anything else
            // is NaN, which the result check then refuses.
            Some(r) => Ok(match r.wait()?.1[..] {
                [v] => v,
                _ => f64::NAN,
            }),
            None => Ok(0.0),
        }
    };
    Ok((ghost(from_left)?, ghost(from_right)?))
}

/// Argument `i` (after the program name) as a number, or `default`.
pub fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// The rank program around `run`: joins the job (`Comm::from_stdin`),
/// runs it, says goodbye (BYE); exit status 0 when `run` found the result
/// right, 1 on a wrong result or an error, 2 when the job could not start.
pub fn main(name: &str, run: fn(&Comm<Endpoint>) -> Result<bool, Error>) -> ExitCode {
    let comm = match Comm::from_stdin() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    let ok = match run(&comm) {
        Ok(ok) => ok,
        Err(e) => {
            eprintln!("{name}: rank {}: {e}", comm.rank());
            return ExitCode::from(1);
        }
    };
    if let Err(e) = comm.into_link().finish() {
        eprintln!("{name}: {e}");
        return ExitCode::from(1);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
