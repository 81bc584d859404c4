/* The Jacobi example of sperli-collective (crates/sperli-collective/
 * examples/jacobi.rs) written against MPI, for `cargo xtask bench`
 * (xtask/src/bench/jacobi.rs): the same grid, partition, halo exchange,
 * allreduce (max) convergence test, gatherv and serial check, and the
 * same output line.
 *
 *   mpirun -n 4 sperli_mpi_jacobi [N] [STEPS] [TOL]
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TO_LEFT 1
#define TO_RIGHT 2

static double sweep(const double *u, long len, double left, double right, double h2f,
                    double *next) {
    double change = 0.0;
    for (long i = 0; i < len; i++) {
        double l = i == 0 ? left : u[i - 1];
        double r = i + 1 == len ? right : u[i + 1];
        next[i] = 0.5 * (l + r + h2f);
        double d = fabs(next[i] - u[i]);
        if (d > change) change = d;
    }
    return change;
}

static void block(long n, int size, int rank, long *first, long *len) {
    long q = n / size, r = n % size;
    *len = q + (rank < r ? 1 : 0);
    *first = rank * q + (rank < r ? rank : r);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc > 1 ? atol(argv[1]) : 50;
    long steps = argc > 2 ? atol(argv[2]) : 20000;
    double tol = argc > 3 ? atof(argv[3]) : 1e-9;
    if (n < size) {
        if (rank == 0) fprintf(stderr, "jacobi: N = %ld is less than the %d ranks\n", n, size);
        MPI_Finalize();
        return 1;
    }
    double h = 1.0 / ((double)n + 1.0), h2f = h * h;
    long first, len;
    block(n, size, rank, &first, &len);
    double *u = calloc(len, sizeof *u), *next = calloc(len, sizeof *next);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    long done = 0;
    while (done < steps) {
        double left = 0.0, right = 0.0;
        MPI_Request req[2];
        int nreq = 0;
        if (rank > 0) MPI_Isend(&u[0], 1, MPI_DOUBLE, rank - 1, TO_LEFT, MPI_COMM_WORLD, &req[nreq++]);
        if (rank + 1 < size)
            MPI_Isend(&u[len - 1], 1, MPI_DOUBLE, rank + 1, TO_RIGHT, MPI_COMM_WORLD, &req[nreq++]);
        if (rank > 0) MPI_Recv(&left, 1, MPI_DOUBLE, rank - 1, TO_RIGHT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank + 1 < size)
            MPI_Recv(&right, 1, MPI_DOUBLE, rank + 1, TO_LEFT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        double local = sweep(u, len, left, right, h2f, next), global;
        double *t = u;
        u = next;
        next = t;
        done++;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (global < tol) break;
    }
    double secs = MPI_Wtime() - t0;
    int *counts = NULL, *displs = NULL;
    double *all = NULL;
    if (rank == 0) {
        counts = malloc(size * sizeof *counts);
        displs = malloc(size * sizeof *displs);
        for (int r = 0; r < size; r++) {
            long f, l;
            block(n, size, r, &f, &l);
            counts[r] = (int)l;
            displs[r] = (int)f;
        }
        all = malloc(n * sizeof *all);
    }
    MPI_Gatherv(u, (int)len, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int ok = 1;
    if (rank == 0) {
        double *s = calloc(n, sizeof *s), *sn = calloc(n, sizeof *sn);
        long sdone = 0;
        while (sdone < steps) {
            double change = sweep(s, n, 0.0, 0.0, h2f, sn);
            double *t = s;
            s = sn;
            sn = t;
            sdone++;
            if (change < tol) break;
        }
        ok = sdone == done && memcmp(s, all, n * sizeof *s) == 0;
        printf("jacobi: n %ld ranks %d steps %ld seconds %.6f steps_per_s %.1f u_mid %.9e serial %s\n",
               n, size, done, secs, done / secs, all[n / 2], ok ? "same" : "DIFFERENT");
        free(s);
        free(sn);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(u);
    free(next);
    free(all);
    free(counts);
    free(displs);
    MPI_Finalize();
    return ok ? 0 : 1;
}
