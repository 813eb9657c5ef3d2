"""draco's own resource use during the demo: memory and CPU of this process.

The embedded API server, the controllers and the demo's checks share one process, so
the CPU time is also split per thread where the platform tells (Linux /proc).
"""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Usage:
    max_rss_mib: float
    cpu_s: float
    threads: dict[str, float]  # label -> CPU seconds of that thread

    def summary(self, start: Usage | None = None) -> str:
        """One phrase; with `start` (taken when the first step began), the CPU time is split
        into starting up (imports, server, controllers) and the work of each thread since."""
        text = f"max RSS {self.max_rss_mib:.0f} MiB, CPU {self.cpu_s:.1f} s"
        if start is None:
            return text
        split = [f"{start.cpu_s:.1f} s starting up"]
        work = 0.0
        for label, cpu in self.threads.items():
            spent = max(cpu - start.threads.get(label, 0.0), 0.0)
            work += spent
            split.append(f"{label} {spent:.1f} s")
        rest = max(self.cpu_s - start.cpu_s - work, 0.0)
        split.append(f"the demo's checks {rest:.1f} s")
        return f"{text} ({', '.join(split)})"


def thread_cpu(native_id: int | None) -> float | None:
    """CPU seconds (user + system) of one thread of this process, on Linux."""
    if native_id is None:
        return None
    try:
        stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    except (IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(threads: dict[str, int | None]) -> Usage:
    """Usage so far; `threads` maps a label to a thread's native id."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    # ru_maxrss is in KiB on Linux, in bytes on macOS.
    rss = ru.ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else ru.ru_maxrss / 1024
    per_thread = {label: cpu for label, tid in threads.items() if (cpu := thread_cpu(tid)) is not None}
    return Usage(rss, ru.ru_utime + ru.ru_stime, per_thread)
