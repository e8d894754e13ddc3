"""A supervisor for each rank of ``mpiexec -n R armillary run`` or ``srun armillary run``, so that a rank killed
outright (``kill -9``, the out-of-memory killer) is named: the launcher's own message names the first process it sees
end, which Hydra may have killed itself on the heels of the one that died.

The process the launcher starts forks at once, before it imports anything heavy or starts MPI, and the child (the
working process) runs the command.  The supervisor only waits: it forwards the signals that launchers and SLURM send,
and when the child is killed by a signal it writes one line naming the rank, then ends by the same signal, so the
launcher reports what it reported before.  The child keeps the launcher's PMI connection (inherited across the fork;
the supervisor's copy stays open until it ends), dies with the supervisor (PR_SET_PDEATHSIG: Hydra ends the other
ranks by killing the processes it started), and has its own process group: Hydra signals each rank's group, so a
signal reaches it once, through the supervisor (SLURM's cgroup tracking signals every process of a step: a signal may
then come twice, which for SIGTERM or SIGUSR1 changes nothing).  Linux only (elsewhere the launched process is the
working one).
"""

import ctypes
import os
import signal
import sys

from armillary.ensemble.launchers import LAUNCHED_PID, launched_rank, launched_size

#: what launchers, SLURM (scancel, --signal, suspend and resume) and a terminal send a rank
FORWARDED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGCONT, signal.SIGTSTP}
PR_SET_PDEATHSIG = 1


def supervise() -> None:
    """Under a launcher of more than one rank on Linux, split into supervisor and working process: returns in the
    working process (and at once when there is nothing to supervise); the supervisor never returns."""
    size = launched_size()
    if size < 2 or not sys.platform.startswith("linux"):
        return
    supervisor = os.getpid()
    # blocked across the fork: a signal that comes before the supervisor's handlers are set waits for them
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    child = os.fork()
    if child == 0:
        _become_worker(supervisor, previous)
        return
    for number in FORWARDED:
        signal.signal(number, lambda signum, frame: os.kill(child, signum))
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    # WNOWAIT: the child stays a zombie, its pid its own, while a signal may still be forwarded to it
    ended = os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    os.waitpid(child, 0)
    if ended.si_code == os.CLD_EXITED:
        sys.exit(ended.si_status)
    _end_as(ended.si_status, launched_rank(), size, child)


def _become_worker(supervisor: int, previous: set) -> None:
    """In the forked child: die with the supervisor, leave its process group (its signals come forwarded), tell the
    ranks' pid line the launched pid, and take the signals again."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != supervisor:  # the supervisor died before prctl: end as it would have ended this process
        os.kill(os.getpid(), signal.SIGKILL)
    os.setpgid(0, 0)
    os.environ[LAUNCHED_PID] = str(supervisor)
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _end_as(signum: int, rank: int, size: int, child: int) -> None:
    """Name the rank whose working process ``child`` was killed by ``signum``, then end by the same signal."""
    try:
        name = signal.Signals(signum).name
    except ValueError:  # a real-time signal
        name = signal.strsignal(signum)
    print(f"armillary: rank {rank} of {size} (pid {child} on {os.uname().nodename}) was killed by signal {signum} "
          f"({name}); finished segments are kept: run the same command to resume, on any number of ranks",
          file=sys.stderr, flush=True)
    if signum != signal.SIGKILL:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached (the signal ends this process): the supervisor must never run the command
