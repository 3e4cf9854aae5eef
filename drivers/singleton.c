/* Open MPI's singleton without its daemon (see singleton.h): the
 * environment MPI_Init reads, and the private session directory. */
#include "config.h"

#include "singleton.h"

#include "launcher.h"

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char session_directory[PATH_MAX];
/* The process that made it: a child forked later (the plugin loader's
 * probe) that ends through exit() runs the same atexit handlers, and must
 * not remove its parent's directory. */
static pid_t owner;

/* Parameters the user may have chosen: any of them set, the singleton
 * starts as Open MPI would start it. */
static int user_set_parameters(void)
{
    static const char *const variables[] = {"OMPI_MCA_ess_singleton_isolated",
                                            "OMPI_MCA_orte_tmpdir_base", "OMPI_MCA_btl", NULL};
    for (int i = 0; variables[i] != NULL; i++)
        if (getenv(variables[i]) != NULL)
            return 1;
    return 0;
}

void singleton_prepare(void)
{
    if (launcher_started_mpi() || user_set_parameters())
        return;
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    int length = snprintf(session_directory, sizeof session_directory, "%s/tfenc-mpi.XXXXXX", base);
    if (length < 0 || (size_t)length >= sizeof session_directory ||
        mkdtemp(session_directory) == NULL) {
        session_directory[0] = '\0';
        return;
    }
    owner = getpid();
    setenv("OMPI_MCA_orte_tmpdir_base", session_directory, 1);
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 1);
    setenv("OMPI_MCA_btl", "self", 1);
    /* One process sends no message to another, so the ob1 PML over self
     * serves it; left to choose, Open MPI first opens the cm PML's
     * transports, and PSM2's library (installed beside Open MPI on
     * Debian) sleeps 0.2 s in its constructor on a machine without
     * Omni-Path, three times the rest of a small job's start. */
    if (getenv("OMPI_MCA_pml") == NULL && getenv("OMPI_MCA_mtl") == NULL)
        setenv("OMPI_MCA_pml", "ob1", 1);
}

static int remove_entry(const char *path, const struct stat *status, int type,
                        struct FTW *position)
{
    (void)status;
    (void)type;
    (void)position;
    remove(path);
    return 0; /* what cannot be removed stays; the rest goes */
}

void singleton_remove_directory(void)
{
    if (session_directory[0] == '\0' || getpid() != owner)
        return;
    nftw(session_directory, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    session_directory[0] = '\0';
}
