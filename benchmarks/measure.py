"""Run one contender as its own process and measure it: wall seconds and peak resident memory.

Peak RSS is each process's own high-water mark (`VmHWM` in /proc), sampled until it exits, for the
process itself (for lakegc: the Python driver) and, separately, its JVM child (Spark's driver JVM,
which in local mode also runs the executors' threads). Spark's Python workers are not counted.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Measured:
    seconds: float
    rss_mb: float  # the process itself
    jvm_rss_mb: float  # its Java child, if any
    stdout: str


def run(cmd: list[str], env: dict[str, str]) -> Measured:
    """Run `cmd` to the end; a non-zero exit raises with its stderr's last lines."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    peaks = {"self": 0, "jvm": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peaks["self"] = max(peaks["self"], _hwm_kb(proc.pid))
            for child in _children(proc.pid):
                if _is_java(child):
                    peaks["jvm"] = max(peaks["jvm"], _hwm_kb(child))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    if proc.returncode:
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {tail}")
    return Measured(round(seconds, 2), round(peaks["self"] / 1024, 1), round(peaks["jvm"] / 1024, 1), out)


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _is_java(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except OSError:
        return False
