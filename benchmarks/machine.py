"""What the benchmarks read about this machine while they run: hypervisor steal and peak memory.

Imported by the benchmark scripts before they take their own folder off the import path.
"""


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


def reset_peak_memory() -> None:
    """Start this process's peak-RSS count afresh (Linux: clear_refs 5 resets VmHWM to the current RSS)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def peak_memory_megabytes() -> float:
    """This process's peak RSS since the last :func:`reset_peak_memory` (VmHWM)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
