"""One GC at a time per repository: a lease row in the metastore, renewed while its run lives.

A second run or sweep on the same repository is refused while the lease is held. A holder that dies
stops renewing: its lease runs out after LEASE_TTL, or sooner when it lived on this host and its
process is gone. Whoever takes a lease over also settles the runs its holder left working: one left
`marking` becomes `failed` ("interrupted"), which is what it is; one left `sweeping` stays so, marked
interrupted, for `gc sweep` to continue. Nothing a dead run did is lost: its candidates and its
`to_delete/` list were written before any delete, and each delete batch's outcome as it was done.

A run on a Spark Connect server (the warm engine, `--remote`) is different: its jobs live in the
server, and run on after its process dies (measured: a job ran its full 40 s after its client was
killed). Its deletes still stop at each round's deadline (`deadline`), so such a lease records the
last deadline it handed out (`work_until`) and is never taken over early for a dead pid once it
has one: it runs out, or its holder releases it once that deadline has passed.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from lakegc.engine.pids import alive as _alive
from lakegc.errors import LakegcError
from lakegc.metastore import Metastore
from lakegc.metastore import schema as t
from lakegc.timeutil import utcnow

LEASE_TTL = timedelta(seconds=60)
HEARTBEAT = timedelta(seconds=2)
ROUND = LEASE_TTL / 2  # how long a delete round may go after the lease was checked: see `Lease.deadline`
INTERRUPTED = "interrupted: the process running it stopped before it finished"
INTERRUPTED_SWEEP = "interrupted: the process sweeping it stopped before it finished; `lakegc gc sweep` continues it"


class LeaseHeld(LakegcError):
    pass


class LeaseLost(LakegcError):
    pass


@dataclass(frozen=True)
class Holder:
    run_id: str
    host: str
    pid: int
    renewed_at: datetime
    expires_at: datetime
    work_until: datetime | None = None  # the last delete deadline handed to a server that outlives the holder


def stale(holder: Holder, now: datetime, host: str, pid_alive: bool) -> bool:
    """May the lease be taken over? When it ran out, or when its holder lived on this host, its
    process is gone, and it missed several renewals (a pid alone may be another container's), and
    no delete round it handed to a Spark Connect server may still be going."""
    if holder.expires_at <= now:
        return True
    return (
        holder.host == host and not pid_alive and holder.renewed_at + 3 * HEARTBEAT <= now and holder.work_until is None
    )


class Lease:
    """Use as a context manager around a run: acquires (or refuses), renews in the background,
    releases at the end. `check()` before irreversible steps."""

    def __init__(self, metastore: Metastore, repository: str, run_id: str):
        self.ms, self.repository, self.run_id = metastore, repository, run_id
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.interrupted: list[str] = []  # runs of a dead holder this lease closed
        self.elsewhere = False  # its Spark jobs run in a server that outlives this process (Spark Connect)
        self._work_until: datetime | None = None
        self._stop = threading.Event()
        self._lost: str | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        self.acquire()
        self._thread = threading.Thread(target=self._renew_loop, name="lakegc-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        # A metastore that is down is suppressed: the lease runs out by itself, and the run's own error matters more.
        with suppress(LakegcError):
            if self._work_until is not None and exc[0] is not None and utcnow() < self._work_until + ROUND:
                self._hold_until(self._work_until + ROUND)  # a round on the server may still be deleting
            else:
                self.release()

    def wait_out_rounds(self) -> None:
        """After a run failed: return once no delete round it handed to a Spark Connect server could
        still be going (its deadline plus half a lease, at most about a minute; at once for a run on
        its own Spark, whose jobs ended with the error). What waits on this (the fence coming down)
        must not happen sooner, so an interrupt does not cut the wait short; a kill leaves the fence
        up and the lease to run out, which is safe."""
        if self._work_until is None:
            return
        until = self._work_until + ROUND
        while (left := (until - utcnow()).total_seconds()) > 0:
            try:
                time.sleep(min(left, 1.0))
            except KeyboardInterrupt:
                continue
        self._work_until = None  # nothing it started can be deleting now: the lease may be released

    def deadline(self) -> float:
        """Until when (epoch seconds) a delete round starting now may send requests: the lease, just
        checked and so renewed, cannot be taken over for LEASE_TTL; ending the round at half of it
        leaves room for clock skew between driver and executors and for a request under way. On a
        server that outlives this process the deadline is recorded with the lease first."""
        self.check()
        now = utcnow()
        until = now + ROUND
        if self.elsewhere:
            with self.ms.write() as conn:
                conn.execute(t.gc_leases.update().where(self._row()).values(work_until=until))
            self._work_until = until
        return until.timestamp()

    def acquire(self) -> None:
        now = utcnow()
        with self.ms.write() as conn:
            row = conn.execute(sa.select(t.gc_leases).where(t.gc_leases.c.repository == self.repository)).first()
            if row is not None:
                holder = Holder(row.run_id, row.host, row.pid, row.renewed_at, row.expires_at, row.work_until)
                if not stale(holder, now, self.host, _alive(holder.pid)):
                    raise LeaseHeld(
                        f"repository {self.repository!r} is being collected by GC run {holder.run_id} "
                        f"(pid {holder.pid} on {holder.host}); its lease runs until "
                        f"{holder.expires_at.isoformat(timespec='seconds')} unless renewed: try again later"
                    )
                conn.execute(
                    t.gc_leases.delete().where(
                        t.gc_leases.c.repository == self.repository, t.gc_leases.c.run_id == holder.run_id
                    )
                )
            conn.execute(
                t.gc_leases.insert().values(
                    repository=self.repository,
                    run_id=self.run_id,
                    host=self.host,
                    pid=self.pid,
                    acquired_at=now,
                    renewed_at=now,
                    expires_at=now + LEASE_TTL,
                )
            )
            self.interrupted = _close_interrupted(conn, self.repository, now)

    def check(self) -> None:
        """Raise unless this run still holds the lease (it renews in the background)."""
        if self._lost is None:
            self._renew()
        if self._lost is not None:
            raise LeaseLost(
                f"GC run {self.run_id} lost its lease on {self.repository!r} ({self._lost}); "
                "it stops here and deletes nothing more"
            )

    def release(self) -> None:
        with self.ms.write() as conn:
            conn.execute(t.gc_leases.delete().where(self._row()))

    def _row(self) -> sa.ColumnElement[bool]:
        """This lease's row: its repository's, as long as this run holds it."""
        return (t.gc_leases.c.repository == self.repository) & (t.gc_leases.c.run_id == self.run_id)

    def _hold_until(self, until: datetime) -> None:
        """Leave the lease to run out at `until` instead of releasing it: what a failed run on a
        Spark Connect server does while a delete round it started may still be going there."""
        with self.ms.write() as conn:
            conn.execute(t.gc_leases.update().where(self._row()).values(expires_at=until))

    def _renew(self) -> None:
        now = utcnow()
        with self.ms.write() as conn:
            renewed = conn.execute(
                t.gc_leases.update()
                .where(self._row(), t.gc_leases.c.expires_at > now)
                .values(renewed_at=now, expires_at=now + LEASE_TTL)
            ).rowcount
        if not renewed:
            self._lost = "it ran out or another run took it over"

    def _renew_loop(self) -> None:
        while not self._stop.wait(HEARTBEAT.total_seconds()):
            if self._lost is not None:
                return
            try:
                self._renew()
            except LakegcError:
                continue  # a metastore hiccup: try again; the lease only runs out after LEASE_TTL


def _close_interrupted(conn: sa.Connection, repository: str, now: datetime) -> list[str]:
    """Runs left in a working state have no process any more: only the lease holder works. A
    mark starts over in a new run; a sweep can be continued, so it stays `sweeping`."""
    ids = []
    runs = t.gc_runs.c
    for state, values, unless in (
        ("marking", {"state": "failed", "error": INTERRUPTED, "finished_at": now}, sa.false()),
        ("sweeping", {"error": INTERRUPTED_SWEEP}, runs.error.is_not(None)),  # a stop it explained itself
    ):
        working = (runs.repository == repository) & (runs.state == state)
        found = list(conn.execute(sa.select(runs.id).where(working)).scalars())
        if found:
            conn.execute(t.gc_runs.update().where(working, sa.not_(unless)).values(**values))
        ids += found
    return ids
