"""What the benchmarks read about this machine while they run: hypervisor steal, load and peak memory.

Imported by the benchmark scripts before they take their own folder off the import path.
"""

import os


def cpu_ticks() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs so far, from /proc/stat (steal: time the hypervisor gave
    this VM's CPUs to someone else; it slows both sides of a comparison, by different amounts)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return fields[7], sum(fields)


def steal_since(start: tuple[int, int]) -> float:
    """Share of all CPU time since ``start`` (a :func:`cpu_ticks` reading) that the hypervisor took."""
    steal, total = cpu_ticks()
    return (steal - start[0]) / max(1, total - start[1])


def run_start() -> tuple[tuple[int, int], float]:
    """(:func:`cpu_ticks`, 1-minute load average) now, for :func:`run_conditions` at the end of a run."""
    return cpu_ticks(), os.getloadavg()[0]


def run_conditions(start: tuple[tuple[int, int], float]) -> str:
    """The hypervisor's steal since ``start`` (a :func:`run_start` reading) and the 1-minute load average
    then and now (other processes on the machine slow every case), as the benchmarks' last line."""
    ticks, load = start
    return (f"hypervisor steal over the run: {steal_since(ticks):.1%}; "
            f"1-min load average at start {load:.1f}, at end {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")


def reset_peak_memory() -> None:
    """Start this process's peak-RSS count afresh (Linux: clear_refs 5 resets VmHWM to the current RSS)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def peak_memory_megabytes() -> float:
    """This process's peak RSS since the last :func:`reset_peak_memory` (VmHWM)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
