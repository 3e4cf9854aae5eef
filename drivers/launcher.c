/* The launchers' environment variables, in one table (see launcher.h). */
#include "config.h"

#include "launcher.h"

#include <stdlib.h>

/* Each variable a launcher sets for the processes it starts: whether it
 * means an MPI launch, and whether it holds the rank (read in this order). */
static const struct launcher_variable {
    const char *name;
    int mpi_launch;
    int holds_rank;
} variables[] = {
    {"OMPI_COMM_WORLD_RANK", 1, 1},
    {"OMPI_COMM_WORLD_SIZE", 1, 0},
    {"PMIX_RANK", 1, 1},
    {"PMI_RANK", 1, 1},
    {"PMI_FD", 1, 0},
    {"SLURM_PROCID", 0, 1}, /* srun sets it with or without an MPI plugin */
};

int launcher_first_rank(void)
{
    for (size_t i = 0; i < sizeof variables / sizeof variables[0]; i++) {
        const char *value = getenv(variables[i].name);
        if (variables[i].holds_rank && value != NULL && value[0] != '\0')
            return atoi(value) == 0;
    }
    return 1;
}

int launcher_started_mpi(void)
{
    for (size_t i = 0; i < sizeof variables / sizeof variables[0]; i++)
        if (variables[i].mpi_launch && getenv(variables[i].name) != NULL)
            return 1;
    return 0;
}
