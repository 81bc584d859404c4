/*
 * sperli_mpi_bench: the OpenMPI baseline of `cargo xtask bench`.
 * The same operations, sizes, iteration counts and accounting as the SPERLI
 * rank program (crates/sperli-bench/src/rank.rs), over MPI.
 *
 *   mpirun -n N sperli_mpi_bench pingpong|coll|startup|pipe|ssend [--quick]
 *
 * Output (rank 0 only): `RESULT <name> <size in bytes> <value>` with times
 * in µs and bandwidths in GB/s (10^9 B/s). One invocation is ONE run.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1024L * 1024L)

static int quick;

static long iters(long full, long shortn) { return quick ? shortn : full; }

static void result(const char *name, long size, double v) {
    printf("RESULT %s %ld %.6f\n", name, size, v);
}

static double unix_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* As limits.rs: lat_count and bw_count. */
static long lat_count(long size) { return size >= 64 * 1024 ? iters(500, 100) : iters(4000, 1000); }
static long bw_count(long size) {
    if (size <= MIB) return iters(128, 32);
    if (size <= 16 * MIB) return iters(16, 4);
    return iters(4, 2);
}

static void pingpong(int me) {
    static const long lat[] = {8, 1024, 64 * 1024};
    static const long bw[] = {MIB, 16 * MIB, 64 * MIB};
    char *buf = malloc(64 * MIB);
    memset(buf, 3, 64 * MIB);
    if (me > 1) { free(buf); return; }
    int peer = 1 - me;
    for (int i = 0; i < 3; i++) {
        long size = lat[i], n = lat_count(size);
        for (int timed = 0; timed < 2; timed++) {
            long count = timed ? n : n / 10;
            double t = MPI_Wtime();
            for (long k = 0; k < count; k++) {
                if (me == 0) {
                    MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
            if (timed && me == 0) result("mpi_lat", size, (MPI_Wtime() - t) * 1e6 / (2.0 * count));
        }
    }
    for (int i = 0; i < 3; i++) {
        long size = bw[i];
        for (int timed = 0; timed < 2; timed++) {
            long count = timed ? bw_count(size) : 1;
            char ack = 1;
            double t = MPI_Wtime();
            if (me == 0) {
                for (long k = 0; k < count; k++)
                    MPI_Send(buf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (long k = 0; k < count; k++)
                    MPI_Recv(buf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            }
            if (timed && me == 0) result("mpi_bw", size, (double)size * count / (MPI_Wtime() - t) / 1e9);
        }
    }
    free(buf);
}

/* As rank.rs: coll_count (SPERLI_BENCH_COUNT=N sets it, for profiling). */
static long coll_count(long size) {
    const char *env = getenv("SPERLI_BENCH_COUNT");
    if (env && atol(env) > 0) return atol(env);
    if (size <= 8) return iters(1000, 40);
    if (size <= 64 * 1024) return iters(100, 6);
    if (size <= MIB) return iters(50, 3);
    return iters(3, 1);
}

enum op { BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, SCATTER };
static const char *op_name[] = {"barrier", "bcast", "reduce", "allreduce", "gather", "scatter"};

static void call(enum op o, double *data, double *out, double *big, int n) {
    switch (o) {
    case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(out, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(data, out, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLREDUCE: MPI_Allreduce(data, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(data, n, MPI_DOUBLE, big, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(big, n, MPI_DOUBLE, out, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    }
}

/* Times `count` calls after a warm-up; rank 0 prints the slowest rank's
 * mean time per call (µs). */
static void timed(enum op o, long size, double *data, double *out, double *big) {
    int n = (int)(size / 8);
    long count = coll_count(size);
    for (long k = 0; k < (count + 9) / 10; k++) call(o, data, out, big, n);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (long k = 0; k < count; k++) call(o, data, out, big, n);
    double us = (MPI_Wtime() - t) * 1e6 / count, worst = 0;
    MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 0) result(op_name[o], size, worst);
}

static void coll(int me, int size) {
    static const long sizes[] = {8, 64 * 1024, MIB, 16 * MIB};
    long maxn = 16 * MIB / 8;
    double *data = malloc(maxn * sizeof(double));
    double *out = malloc(maxn * sizeof(double));
    double *big = malloc(maxn * sizeof(double) * size);
    for (long i = 0; i < maxn; i++) data[i] = (double)(i % 1000);
    memset(out, 0, maxn * sizeof(double));
    memset(big, 0, maxn * sizeof(double) * size);
    (void)me;
    timed(BARRIER, 0, data, out, big);
    for (int i = 0; i < 4; i++)
        for (int o = BCAST; o <= SCATTER; o++) timed((enum op)o, sizes[i], data, out, big);
    free(data);
    free(out);
    free(big);
}

/* The twin of `sperli-bench rank pipe` (crates/sperli-bench/src/pipelined.rs):
 * allreduce (f64 sum) and bcast (root 0) of 8 B .. 64 MiB per
 * rank, one MPI call each, the same counts; `RESULT mpi_allreduce|mpi_bcast`. */
static long pipe_count(long size) {
    if (size <= 1024) return iters(1000, 40);
    if (size <= 64 * 1024) return iters(100, 10);
    if (size <= MIB) return iters(50, 4);
    if (size <= 16 * MIB) return iters(5, 2);
    return iters(3, 1);
}

static void pipe_timed(int allreduce, long size, double *data, double *out) {
    int n = (int)(size / 8), me;
    long count = pipe_count(size);
    for (long k = 0; k < count / 10 + (count % 10 != 0); k++) {
        if (allreduce) MPI_Allreduce(data, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        else MPI_Bcast(out, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (long k = 0; k < count; k++) {
        if (allreduce) MPI_Allreduce(data, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        else MPI_Bcast(out, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    double us = (MPI_Wtime() - t) * 1e6 / count, worst = 0;
    MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 0) result(allreduce ? "mpi_allreduce" : "mpi_bcast", size, worst);
}

static void pipe_mode(void) {
    static const long sizes[] = {8, 1024, 64 * 1024, 256 * 1024, MIB, 4 * MIB, 16 * MIB, 32 * MIB, 64 * MIB};
    long maxn = 64 * MIB / 8;
    double *data = malloc(maxn * sizeof(double));
    double *out = malloc(maxn * sizeof(double));
    for (long i = 0; i < maxn; i++) data[i] = (double)(i % 1000) + 0.25;
    memset(out, 0, maxn * sizeof(double));
    for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) {
        pipe_timed(1, sizes[i], data, out);
        pipe_timed(0, sizes[i], data, out);
    }
    free(data);
    free(out);
}

/* The twin of `sperli-bench rank p2p`'s synchronous rows
 * (crates/sperli-bench/src/p2p.rs): ping-pong of 8 B and 1 KiB with
 * MPI_Ssend both ways (rank 0 MPI_Ssend, rank 1 MPI_Recv then MPI_Ssend
 * back) and with MPI_Send both ways, interleaved in rounds whose order
 * rotates, the same counts; `RESULT mpi_ssend_lat|mpi_send_lat` (µs, half a
 * round trip). */
static double round_trips(int me, int sync, long size, long count, char *buf) {
    int peer = 1 - me;
    double t = MPI_Wtime();
    for (long k = 0; k < count; k++) {
        if (me == 0) {
            if (sync) MPI_Ssend(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            else MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (sync) MPI_Ssend(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            else MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t;
}

static void ssend_mode(int me) {
    static const long sizes[] = {8, 1024};
    static const char *names[] = {"mpi_send_lat", "mpi_ssend_lat"};
    char buf[1024];
    memset(buf, 3, sizeof buf);
    if (me > 1) return;
    long rounds = iters(10, 4);
    for (int i = 0; i < 2; i++) {
        long size = sizes[i], n = lat_count(size), per_round = (n + rounds - 1) / rounds;
        double spent[2] = {0, 0};
        for (int sync = 0; sync < 2; sync++) round_trips(me, sync, size, n / 10, buf);
        for (long r = 0; r < rounds; r++)
            for (int j = 0; j < 2; j++) {
                int sync = (int)((j + r) % 2);
                spent[sync] += round_trips(me, sync, size, per_round, buf);
            }
        if (me == 0)
            for (int sync = 0; sync < 2; sync++)
                result(names[sync], size, spent[sync] * 1e6 / (2.0 * per_round * rounds));
    }
}

int main(int argc, char **argv) {
    double started = unix_ns();
    const char *mode = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else mode = argv[i];
    }
    MPI_Init(&argc, &argv);
    int me, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!mode) {
        if (me == 0) fprintf(stderr, "usage: sperli_mpi_bench pingpong|coll|startup|pipe|ssend [--quick]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strcmp(mode, "pingpong") == 0) {
        pingpong(me);
    } else if (strcmp(mode, "coll") == 0) {
        coll(me, size);
    } else if (strcmp(mode, "pipe") == 0) {
        pipe_mode();
    } else if (strcmp(mode, "ssend") == 0) {
        ssend_mode(me);
    } else if (strcmp(mode, "startup") == 0) {
        /* OpenMPI opens TCP connections lazily: one int to and from every
         * other rank makes every pair connect, like SPERLI's full mesh. */
        int *s = calloc(size, sizeof(int)), *r = calloc(size, sizeof(int));
        MPI_Request *q = calloc(2 * size, sizeof(MPI_Request));
        int nq = 0;
        for (int p = 0; p < size; p++) {
            if (p == me) continue;
            MPI_Irecv(&r[p], 1, MPI_INT, p, 9, MPI_COMM_WORLD, &q[nq++]);
            MPI_Isend(&s[p], 1, MPI_INT, p, 9, MPI_COMM_WORLD, &q[nq++]);
        }
        MPI_Waitall(nq, q, MPI_STATUSES_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
        free(q);
        if (me == 0) {
            printf("RESULT rank0_main_unix_ns 0 %.0f\n", started);
            printf("RESULT all_connected_unix_ns 0 %.0f\n", unix_ns());
        }
        free(s);
        free(r);
    } else {
        if (me == 0) fprintf(stderr, "sperli_mpi_bench: unknown mode %s\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
