/* tfenc-batch started without a launcher (no mpirun, no srun with PMI):
 * Open MPI's singleton, made to start without the daemon it would fork. */
#ifndef TFENC_DRIVERS_SINGLETON_H
#define TFENC_DRIVERS_SINGLETON_H

/* Before MPI_Init. A process no launcher started is an Open MPI
 * singleton, and MPI_Init forks a daemon (orted) beside it in case it
 * spawns or connects to other processes later, which tfenc-batch never
 * does: a third of a small job's CPU time (docs/cluster.md). Without it
 * (ess_singleton_isolated) every such process on a host takes job family
 * 0, so their session directories and the shared-memory transport's
 * segments would share names, and two runs starting at once collide
 * ("mkdir ... jf.0: File exists", MPI_Init fails): each run gets a session
 * directory of its own under $TMPDIR (or /tmp), and only the self
 * transport and the ob1 PML, all a one-rank job uses (the PML unless the
 * user chose a PML or MTL). Nothing is changed under a launcher, or when
 * the user set any of the other Open MPI parameters, or when the
 * directory cannot be made (the daemon is forked as before). Other MPI
 * libraries ignore the variables. */
void singleton_prepare(void);

/* After MPI_Finalize, or before leaving without it: removes the session
 * directory singleton_prepare made, whatever Open MPI left in it. Safe to
 * call more than once, when nothing was prepared, and in a forked child
 * (which leaves it alone). */
void singleton_remove_directory(void);

#endif
