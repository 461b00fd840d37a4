"""Run one contender as its own process and measure it: wall seconds and peak resident memory.

Every contender starts from the same cache state: the lake cold, the programs warm. Dirty pages
are written out and, where the kernel lets us (root), the page, dentry and inode caches dropped;
then the programs' own files (this environment: Python, pyspark's jars, delta-rs; the Java runtime)
are read back in, as on a machine that runs them daily. Without that the order decides the
ratios: a contender right after a restore waits on its writeback, one after another contender
finds the namespace's inodes cached (and this machine reclaims cache on its own meanwhile).

Peak RSS is each process's own high-water mark (`VmHWM` in /proc), sampled until it exits, for the
process itself (for lakegc: the Python driver) and, separately, its JVM child (Spark's driver JVM,
which in local mode also runs the executors' threads). Spark's Python workers are not counted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Measured:
    seconds: float
    rss_mb: float  # the process itself
    jvm_rss_mb: float  # its Java child, if any
    stdout: str
    cold: bool  # started with dropped caches
    command: str = ""  # what ran, and the end of what it said on stderr: for `json`'s error
    stderr_tail: str = ""

    def json(self) -> dict:
        """Its stdout as the JSON document it promised: one that exited 0 and printed something
        else says so with the command, what it printed and the end of its stderr."""
        try:
            return json.loads(self.stdout)
        except ValueError:
            raise RuntimeError(
                f"{self.command} exited 0 but printed no JSON: stdout {self.stdout[:300]!r}; "
                f"stderr ended: {self.stderr_tail}"
            ) from None


_drop_caches = True


def write_aged(path: Path, when: float) -> None:
    """An 8-byte file at `path` (its folder made when missing), modified at `when` (epoch seconds):
    the lakes the benchmarks build are old, as GC's lakes are."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"01234567")
    os.close(fd)
    os.utime(path, (when, when))


def keep_caches() -> None:
    """For quick runs (the smoke test): start contenders with whatever is cached. Dropping caches
    also slows everything else the machine is running."""
    global _drop_caches
    _drop_caches = False


def cold_start() -> bool:
    """Write dirty pages out, drop the caches and warm the programs back up; False when told to
    keep the caches or when dropping is not allowed here."""
    os.sync()
    if not _drop_caches:
        return False
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    for folder in _program_folders():
        for root, _, names in os.walk(folder):
            for name in names:
                try:
                    with open(os.path.join(root, name), "rb") as f:
                        while f.read(1 << 20):
                            pass
                except OSError:
                    pass
    return True


def _program_folders() -> list[Path]:
    """This environment (the interpreter, its packages, pyspark's jars) and the Java runtime."""
    folders = [Path(sys.prefix), Path(sys.base_prefix)]
    java = shutil.which("java")
    if java:
        folders.append(Path(os.path.realpath(java)).parents[1])
    return folders


def run(cmd: list[str], env: dict[str, str]) -> Measured:
    """Run `cmd` to the end, from a cold start; a non-zero exit raises with its stderr's last lines."""
    cold = cold_start()
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
    tail = "\n".join(err.strip().splitlines()[-5:])
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {tail}")
    rss, jvm = round(peaks["self"] / 1024, 1), round(peaks["jvm"] / 1024, 1)
    return Measured(round(seconds, 2), rss, jvm, out, cold, command=" ".join(cmd[:6]), stderr_tail=tail)


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


def dataset_main(doc: str, measure: Callable[..., dict], summary: Callable[[dict], str]) -> None:
    """The command line of a benchmark that builds one dataset the size of S1 (`--objects` scales
    it, a twentieth of it garbage) and times one lakegc command on it: `benchmarks.lakefs`,
    `benchmarks.warehouse`. `--json` prints the figures, else their summary line."""
    import argparse
    import json
    from pathlib import Path

    from rich.console import Console

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("LAKEGC_BENCH_DIR", "/tmp/lakegc-bench")))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--warm", action="store_true", help="keep the caches (quick runs)")
    args = parser.parse_args()
    if args.warm:
        keep_caches()
    console = Console(stderr=True)
    figures = measure(args.workdir, args.objects, args.objects // 20, console)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    console.print(summary(figures))
