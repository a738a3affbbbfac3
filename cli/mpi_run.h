/* mpi_run.h - one model as several processes under MPI: the contract is
 * spec/dataparallel.md, "Across processes and machines".
 *
 * `mpirun -np P dpc run ...` starts P copies of the CLI. Every rank loads
 * the model, the weights and the inputs, takes its torch.chunk share of the
 * batch (the same table as replicas in one process, dpc_chunk_sizes: ranks
 * 0..k-1 get s = ceil(b/P) rows each, the last the remainder, ranks k..P-1
 * stay idle), runs it on its own device list, and rank 0 gathers the
 * outputs in rank order with MPI_Gatherv. Between processes the bytes move
 * through MPI only: no home-made transport.
 *
 * This is compiled into the dpc executable only (never into libdpc, which
 * stays free of MPI). Built without MPI (CMake option DPC_MPI=off, or no
 * MPI found), every function that needs MPI returns DPC_EUSAGE saying so.
 * Like the rest of the runtime it never prints and never exits: the CLI
 * decides what rank 0 says.
 *
 * Every dpc_mpi_* function after dpc_mpi_init is collective: all ranks call
 * it, in the same order, or the job hangs. The CLI therefore carries a
 * local failure to the next collective (dpc_mpi_agree) instead of leaving
 * early. MPI's own errors abort the whole job (MPI_ERRORS_ARE_FATAL), which
 * is the one failure that cannot hang. */
#ifndef DPC_MPI_RUN_H
#define DPC_MPI_RUN_H

#include "dataparallel.h"

#define DPC_MPI_NAME_MAX 64

typedef struct dpc_mpi {
    int rank, size;
    bool active; /* MPI_Init was called and MPI_Finalize is due */
} dpc_mpi;

/* Whether this dpc was built with MPI. */
bool dpc_mpi_built(void);

/* What the launcher put in the environment, read without touching MPI (a
 * plain run never initialises it): the number of processes, 0 when no
 * launcher started this one, -1 when one did but did not say how many
 * (PMIx alone). Open MPI sets OMPI_COMM_WORLD_SIZE, MPICH's Hydra
 * PMI_SIZE, PMIx PMIX_RANK. */
int dpc_mpi_env_size(void);
/* This process's rank by the same variables, -1 when unknown. */
int dpc_mpi_env_rank(void);
/* This process's rank among those on its machine, 0 when unknown. */
int dpc_mpi_env_local_rank(void);

/* MPI_Init_thread (only the main thread calls MPI; the replicas' pool
 * threads never do), then rank and size. */
dpc_status dpc_mpi_init(dpc_mpi *m, dpc_err *e);
/* MPI_Finalize, once, if dpc_mpi_init succeeded. */
void dpc_mpi_finalize(dpc_mpi *m);

/* This rank's share of the batch. */
typedef struct dpc_mpi_share {
    bool scattered;        /* false with one rank: the inputs whole */
    int64_t batch;         /* dim 0 of the tensor inputs, -1 with none */
    int k;                 /* ranks with work: 0..k-1 */
    bool works;            /* rank < k */
    int64_t offset, rows;  /* rows [offset, offset + rows) of every input */
} dpc_mpi_share;

/* Not collective (every rank computes the same table). Checks that all
 * tensor inputs have rank >= 1 and one batch (an error naming both
 * otherwise, as within a process), cuts it with dpc_chunk_sizes over
 * m->size ranks, and sets views[j] to this rank's rows of in[j] (sharing
 * its data). With one rank, or no tensor input, views are the inputs whole
 * and rank 0 alone works. names may be NULL; whole[j] (whole may be NULL)
 * marks an input without the batch dim, which every rank gets whole. */
dpc_status dpc_mpi_take_share(const dpc_mpi *m, const dpc_tensor *const *in, int n, const char *const *names,
                              const bool *whole, dpc_tensor *views, dpc_mpi_share *sh, dpc_err *e);

/* Collective: every rank says how it fared so far (rc 0 = fine, else its
 * exit status) and what it would have printed (text, len bytes). All ranks
 * learn the lowest failing rank (*fail_rank, -1 when none) and its exit
 * status (*fail_rc); rank 0 also receives that rank's text in *fail_text
 * (malloc'ed, NUL-terminated, cut at 64 KiB; NULL elsewhere). */
dpc_status dpc_mpi_agree(const dpc_mpi *m, int rc, const char *text, size_t len, int *fail_rank, int *fail_rc,
                         char **fail_text, dpc_err *e);

/* One rank's part of a run, as rank 0 sees it after dpc_mpi_gather. */
typedef struct dpc_mpi_rank_report {
    int32_t works;                      /* 0: idle (rank >= k) */
    int64_t offset, rows;               /* its share; rows -1: no tensor input */
    double seconds;                     /* its forward */
    char host[DPC_MPI_NAME_MAX];        /* MPI_Get_processor_name */
    char devices[DPC_MPI_NAME_MAX];     /* its device list, as given */
} dpc_mpi_rank_report;

/* Collective: gathers output j (j < n) of every working rank on rank 0,
 * concatenated on dim 0 in rank order, into gathered[j] (rank 0 only; NULL
 * elsewhere). local[] are this rank's outputs (ignored on an idle rank).
 * All pieces of an output must agree on dtype and dims 1.. . A 0-dim piece
 * counts as one row, so 0-dim outputs become a vector of k values, as with
 * several replicas; *nzero_dim (rank 0) counts such outputs, for a warning.
 * With one rank the outputs move over as they are. me is this rank's
 * report; on rank 0 *all receives every rank's (malloc'ed, size entries;
 * NULL elsewhere). Fails on every rank alike, the message naming the rank
 * at fault; nothing is gathered then. Running out of memory in the middle
 * of a collective cannot be agreed on: it ends the job with MPI_Abort. */
dpc_status dpc_mpi_gather(const dpc_mpi *m, const dpc_mpi_share *sh, dpc_tensor **local, int n,
                          dpc_tensor **gathered, int *nzero_dim, const dpc_mpi_rank_report *me,
                          dpc_mpi_rank_report **all, dpc_err *e);

/* Collective: rank 0's status reaches every rank (e.g. whether it could
 * write the outputs), so that they all exit alike. */
dpc_status dpc_mpi_bcast_status(const dpc_mpi *m, dpc_status s);

#endif
