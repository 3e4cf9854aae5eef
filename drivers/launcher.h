/* What the launcher that started this process (mpirun, srun, or none) tells
 * it through the environment, read before MPI_Init. */
#ifndef TFENC_DRIVERS_LAUNCHER_H
#define TFENC_DRIVERS_LAUNCHER_H

/* 1 when the process is its job's first rank, or no launcher says which
 * rank it is. */
int launcher_first_rank(void);

/* 1 when an MPI launcher (Open MPI's mpirun, PMIx, PMI-1 or PMI-2, as srun
 * --mpi=... sets up) started the process, so that MPI_Init joins its job;
 * 0 when MPI_Init makes it a singleton (no launcher, or srun without an
 * MPI plugin, whose tasks still know their rank). */
int launcher_started_mpi(void);

#endif
