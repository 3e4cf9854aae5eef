/* LD_PRELOAD shim for tests/careless_inputs.sh: a SIGTERM that arrives while
 * MPI_Init runs (scancel right after a job starts), made deterministic by
 * raising it at MPI_Init's entry, before the real one (PMPI_Init) starts. */
#include <mpi.h>
#include <signal.h>

int MPI_Init(int *argc, char ***argv)
{
    raise(SIGTERM);
    return PMPI_Init(argc, argv);
}
