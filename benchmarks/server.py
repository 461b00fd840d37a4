"""`python -m benchmarks.server [--objects N] [--size BYTES] [--large-mb M] [--threads T] [--json]`:
uploads and reads per second through `lakegc serve` with lakeFS's own Python clients.

A fresh metastore (SQLite) and a local namespace under `--dir`; `lakegc serve` as its own process
on a loopback port. Then, one after another: N small objects uploaded by `lakefs` (a raw chunked
body), by `lakefs-sdk` (multipart/form-data), by `lakefs` from T threads at once; N objects read
back whole by each client, and from T threads; a commit of everything staged; and one large object
uploaded and read back, for bandwidth. Every read is checked byte for byte. The floor is the same
small uploads and reads through the repository API in this process (no HTTP): what the server
adds is the difference. The server's peak resident memory is its own high-water mark, which a
large object does not raise when bodies stream (docs/server.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from benchmarks.measure import _hwm_kb

app = typer.Typer(add_completion=False)


@dataclass(frozen=True)
class Timed:
    operation: str
    client: str
    objects: int
    bytes_each: int
    seconds: float
    server_rss_mb: float  # the server's high-water mark after this step

    @property
    def per_second(self) -> float:
        return self.objects / self.seconds if self.seconds else 0.0

    @property
    def mb_per_second(self) -> float:
        return self.objects * self.bytes_each / self.seconds / 2**20 if self.seconds else 0.0


def _payload(i: int, size: int) -> bytes:
    seed = hashlib.sha256(str(i).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _timed(call: Callable[[], None]) -> float:
    started = time.perf_counter()
    call()
    return round(time.perf_counter() - started, 3)


def _parallel(threads: int, work: Callable[[int], None], count: int) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(count)))


def run(workdir: Path, objects: int, size: int, large_mb: int, threads: int, console: Console) -> list[Timed]:
    import lakefs
    import lakefs_sdk

    from lakegc.repo.repository import Lake
    from lakegc.server.launch import serving

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    environ = {
        **os.environ,
        "LAKEGC_HOME": str(workdir / "home"),
        "LAKEGC_METASTORE": f"sqlite:///{workdir / 'meta.db'}",
    }
    made = subprocess.run(
        [sys.executable, "-m", "lakegc", "auth", "create-user", "bench", "--json"],
        env=environ, capture_output=True, text=True, check=True,
    )  # fmt: skip
    pair = json.loads(made.stdout)
    lake = Lake(environ["LAKEGC_METASTORE"])
    lake.create_repository("floor", str(workdir / "floor"))
    floor = lake.repository("floor")
    small = [_payload(i, size) for i in range(objects)]
    files = workdir / "files"  # lakefs-sdk uploads files by path
    files.mkdir()
    for i, data in enumerate(small):
        (files / str(i)).write_bytes(data)
    large = _payload(-1, large_mb << 20)
    results: list[Timed] = []

    with serving(environ) as served:
        pid = served.process.pid

        def step(operation: str, client: str, count: int, each: int, call: Callable[[], None]) -> None:
            seconds = _timed(call)
            results.append(Timed(operation, client, count, each, seconds, round(_hwm_kb(pid) / 1024, 1)))
            console.print(f"  {operation} ({client}): {count:,} in {seconds:.2f} s", highlight=False)

        client = lakefs.Client(host=served.url, username=pair["access_key_id"], password=pair["secret_access_key"])
        repo = lakefs.Repository("bench", client=client).create(storage_namespace=f"local://{workdir / 'ns'}")
        main = repo.branch("main")
        conf = lakefs_sdk.Configuration(
            host=served.api, username=pair["access_key_id"], password=pair["secret_access_key"]
        )
        sdk = lakefs_sdk.ApiClient(conf)
        objects_api = lakefs_sdk.ObjectsApi(sdk)

        def check(data: bytes, i: int) -> None:
            if data != small[i]:
                raise RuntimeError(f"object {i} read back wrong")

        console.print(f"lakegc serve at {served.url}: {objects:,} objects of {size:,} bytes, then {large_mb} MiB")

        def each(work: Callable[[int], object]) -> Callable[[], None]:
            def run() -> None:
                for i in range(objects):
                    work(i)

            return run

        def threaded(work: Callable[[int], object]) -> Callable[[], None]:
            return lambda: _parallel(threads, work, objects)

        def upload_sdk(i: int) -> None:
            objects_api.upload_object("bench", "main", f"b/{i}", content=str(files / str(i)))

        def read_sdk(i: int) -> None:
            check(bytes(objects_api.get_object("bench", "main", f"b/{i}")), i)

        no_http, raw, reader = "repository API, no HTTP", "lakefs (raw body)", "lakefs (reader)"
        step("floor: upload", no_http, objects, size, each(lambda i: floor.upload("main", f"s/{i}", small[i])))
        step("floor: read", no_http, objects, size, each(lambda i: check(floor.read("main", f"s/{i}"), i)))
        step("upload", raw, objects, size, each(lambda i: main.object(f"a/{i}").upload(data=small[i])))
        step("upload", "lakefs-sdk (multipart)", objects, size, each(upload_sdk))
        step(f"upload, {threads} threads", raw, objects, size,
             threaded(lambda i: main.object(f"c/{i}").upload(data=small[i])))  # fmt: skip
        step("read", reader, objects, size, each(lambda i: check(main.object(f"a/{i}").reader().read(), i)))
        step("read", "lakefs-sdk (get_object)", objects, size, each(read_sdk))
        step(f"read, {threads} threads", reader, objects, size,
             threaded(lambda i: check(main.object(f"c/{i}").reader().read(), i)))  # fmt: skip
        step("commit of the staged objects", "lakefs", 3 * objects, 0, lambda: main.commit(message="bench"))

        def read_large() -> None:
            digest = hashlib.sha256()
            with main.object("large").reader() as reader:
                while chunk := reader.read(8 << 20):
                    digest.update(chunk)
            if digest.digest() != hashlib.sha256(large).digest():
                raise RuntimeError("the large object read back wrong")

        step("upload, large", raw, 1, len(large), lambda: main.object("large").upload(data=large))
        step("read, large", reader, 1, len(large), read_large)
        sdk.close()
    return results


def table(results: Sequence[Timed], when: str) -> Table:
    t = Table(
        title=f"lakegc serve with lakeFS's Python clients, on this machine ({when})",
        caption="floor: the same objects through the repository API in one process; "
        "server RSS: the server process's peak resident memory after the step",
    )
    for column in ("operation", "client", "objects", "bytes each", "seconds", "per second", "MB/s", "server RSS MB"):
        t.add_column(column, justify="left" if column in ("operation", "client") else "right")
    for r in results:
        t.add_row(
            r.operation,
            r.client,
            f"{r.objects:,}",
            f"{r.bytes_each:,}",
            f"{r.seconds:.2f}",
            f"{r.per_second:,.0f}" if r.per_second >= 10 else f"{r.per_second:.2f}",
            f"{r.mb_per_second:,.1f}" if r.bytes_each else "-",
            f"{r.server_rss_mb:,.0f}",
        )
    return t


@app.command()
def main(
    objects: int = typer.Option(2000, "--objects", min=1, help="How many small objects each step moves."),
    size: int = typer.Option(4096, "--size", min=0, help="Bytes of each small object."),
    large_mb: int = typer.Option(512, "--large-mb", min=1, help="MiB of the large object."),
    threads: int = typer.Option(8, "--threads", min=1, help="Clients at once in the threaded steps."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON only."),
    workdir: Path = typer.Option(Path("/tmp/lakegc-bench-server"), "--dir", help="Emptied first."),
) -> None:
    console = Console(stderr=True)
    results = run(workdir, objects, size, large_mb, threads, console)
    if as_json:
        print(
            json.dumps([{**asdict(r), "per_second": r.per_second, "mb_per_second": r.mb_per_second} for r in results])
        )
    else:
        Console(width=140).print(table(results, time.strftime("%Y-%m-%d")))


if __name__ == "__main__":
    sys.exit(app())
