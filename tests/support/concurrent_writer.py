"""A separate process for tests/test_gc_concurrency.py, driving lakegc through its Python API.

    python concurrent_writer.py hammer METASTORE REPO INDEX --stop FILE --seed N
        Hammers branch `wINDEX` (and paths under `wINDEX/`) until FILE exists: uploads and
        overwrites (some staged seconds after their object landed), rm, commits, merges into main,
        resets, temporary branches (created from its own HEAD only), address tokens (linked,
        abandoned short-lived, abandoned long-lived), shallow copies of its own entries, tags of its
        own HEAD; plus branch `wINDEX-draft`, whose staging lives long (overwritten, rarely reset or
        committed); and reads of both branches (which must always succeed: a HEAD and its staging
        are never garbage). Prints a JSON report.
    python concurrent_writer.py ops METASTORE REPO OPS_JSON
        Runs a list of API calls ([name, *args], ...) in order; prints their results as JSON.
    python concurrent_writer.py lease METASTORE REPO RUN_ID --ready FILE --go FILE --hold SECONDS
        Touches the ready file, waits for the go file, then tries to take the repository's GC lease
        and holds it; prints JSON.

Only this writer moves `wINDEX`, `wINDEX-draft` and its temporary branches, so everything it reads
back from its own branch is referenced from the moment it lists it until it reads it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import sys
import time
from collections import Counter
from datetime import timedelta

from lakegc.errors import ConcurrentUpdate, LakegcError, NothingToCommit, ObjectGone
from lakegc.repo.repository import Lake, Repository
from lakegc.timeutil import utcnow


class Hammer:
    def __init__(self, repo: Repository, index: int, seed: int):
        self.repo = repo
        self.me = f"w{index}"
        self.draft = f"w{index}-draft"  # staging that lives long: rarely reset or committed
        self.rnd = random.Random(seed)
        self.ops: Counter[str] = Counter()
        self.errors: list[str] = []  # reads that failed: live data gone or corrupt
        self.live_tokens: list[dict] = []  # abandoned long-lived tokens, object written: must survive
        self.commits: list[str] = []  # every commit id the API returned to us
        self.seq = 0

    # -- helpers --------------------------------------------------------------------------------
    def content(self, path: str) -> bytes:
        self.seq += 1
        return f"{self.me} {path} #{self.seq} {self.rnd.random()}\n".encode() * self.rnd.randint(1, 8)

    def path(self) -> str:
        return f"{self.me}/f{self.rnd.randrange(10)}"

    def own_entries(self, branch: str | None = None) -> list:
        return list(self.repo.list(branch or self.me, f"{self.me}/"))

    def read_back(self, ref: str, entry) -> None:  # type: ignore[no-untyped-def]
        try:
            data = self.repo.read(ref, entry.path)
        except ObjectGone as exc:
            self.errors.append(f"{ref}/{entry.path} ({entry.address}): {exc}")
            return
        if len(data) != entry.size or hashlib.md5(data, usedforsecurity=False).hexdigest() != entry.checksum:
            self.errors.append(f"{ref}/{entry.path} ({entry.address}): content does not match its entry")

    def commit(self, branch: str) -> bool:
        try:
            self.commits.append(self.repo.commit(branch, f"{branch} #{self.seq}").id)
            return True
        except NothingToCommit:
            return False

    # -- operations -----------------------------------------------------------------------------
    def op_upload(self) -> None:
        path = self.path()
        self.repo.upload(self.me, path, self.content(path))

    def op_slow_upload(self) -> None:
        """An upload whose staging comes seconds after its object landed (a slow client or metastore),
        well within GC's min-age: GC must not take the object in between."""
        storage, path = self.repo.storage, self.path()
        write = storage.write

        def write_then_stall(key, data):  # type: ignore[no-untyped-def]
            info = write(key, data)
            time.sleep(self.rnd.uniform(0.5, 4.0))
            return info

        storage.write = write_then_stall  # type: ignore[method-assign]
        try:
            self.repo.upload(self.rnd.choice([self.me, self.draft]), path, self.content(path))
        finally:
            del storage.write

    def op_rm(self) -> None:
        entries = self.own_entries()
        if entries:
            self.repo.remove(self.me, self.rnd.choice(entries).path)

    def op_commit(self) -> None:
        if not self.commit(self.me):
            self.ops["commit (nothing)"] += 1

    def op_merge(self) -> None:
        for _ in range(5):
            try:
                self.commits.append(self.repo.merge(self.me, "main").id)
                return
            except NothingToCommit:
                self.ops["merge (nothing)"] += 1
                return
            except ConcurrentUpdate:
                self.ops["merge (main kept moving, retried)"] += 1
        self.ops["merge (gave up)"] += 1

    def op_reset(self) -> None:
        self.repo.reset_branch(self.me)

    def op_draft(self) -> None:
        path = f"{self.me}/d{self.rnd.randrange(6)}"
        self.repo.upload(self.draft, path, self.content(path))

    def op_draft_reset(self) -> None:
        self.repo.reset_branch(self.draft)

    def op_draft_commit(self) -> None:
        """Staging that aged past min-age gets committed: from then on, only the commit holds it."""
        self.commit(self.draft)

    def op_temp_branch(self) -> None:
        """Created from our own HEAD, which only we move: never a branch from an old commit."""
        self.seq += 1
        temp = f"{self.me}-tmp{self.seq}"
        self.repo.create_branch(temp, self.me)
        for _ in range(self.rnd.randint(1, 3)):
            path = f"{self.me}/tmp{self.seq}/{self.rnd.randrange(4)}"  # ours alone: merging it never conflicts
            self.repo.upload(temp, path, self.content(path))
        fate = self.rnd.choice(["drop staging", "dangling commit", "merge"])
        self.ops[f"temp branch ({fate})"] += 1
        if fate != "drop staging":
            self.commit(temp)
        if fate == "merge":
            self.commit(self.me)  # a merge needs a clean destination
            with contextlib.suppress(NothingToCommit):
                self.commits.append(self.repo.merge(temp, self.me).id)
        self.repo.delete_branch(temp)

    def op_token(self) -> None:
        fate = self.rnd.choice(["link", "link", "abandon (expires)", "abandon (live)"])
        self.ops[f"token ({fate})"] += 1
        path, branch = self.path(), self.rnd.choice([self.me, self.draft])
        ttl = {"link": 120, "abandon (expires)": 1, "abandon (live)": 3600}[fate]
        claims = self.repo.get_physical_address(branch, path, timedelta(seconds=ttl))
        data = self.content(path)
        self.repo.storage.write(claims.address, data)
        if fate == "link":
            address = claims.address if self.rnd.random() < 0.5 else self.repo.storage.full_uri(claims.address)
            self.repo.link(
                branch,
                path,
                address,
                len(data),
                hashlib.md5(data, usedforsecurity=False).hexdigest(),
                token=self.repo.sign(claims),
            )
        elif fate == "abandon (live)":
            self.live_tokens.append({"address": claims.address, "expires_at": claims.expires_at.isoformat()})

    def op_copy(self) -> None:
        entries = self.own_entries()
        if entries:
            self.repo.copy(
                self.me,
                self.rnd.choice(entries).path,
                self.rnd.choice([self.me, self.draft]),
                f"{self.me}/copy{self.rnd.randrange(3)}",
            )

    def op_tag(self) -> None:
        self.seq += 1
        self.repo.create_tag(f"{self.me}-tag{self.seq}", self.me)

    def op_read(self) -> None:
        for branch in (self.me, self.draft):
            entries = self.own_entries(branch)
            for entry in self.rnd.sample(entries, min(2, len(entries))):
                self.read_back(branch, entry)

    WEIGHTS = {
        "upload": 30,
        "slow_upload": 2,
        "rm": 5,
        "commit": 10,
        "merge": 6,
        "reset": 2,
        "draft": 3,
        "draft_reset": 0.3,
        "draft_commit": 0.3,
        "temp_branch": 4,
        "token": 7,
        "copy": 3,
        "tag": 1,
        "read": 8,
    }

    def run(self, stop: str, max_seconds: float, pause: float) -> None:
        self.repo.create_branch(self.draft, self.me)
        for _ in range(3):
            self.op_draft()
        names, weights = zip(*self.WEIGHTS.items())
        deadline = time.monotonic() + max_seconds
        while not os.path.exists(stop) and time.monotonic() < deadline:
            name = self.rnd.choices(names, weights)[0]
            getattr(self, f"op_{name}")()
            self.ops[name] += 1
            time.sleep(self.rnd.uniform(0, 2 * pause))
        for branch in (self.me, self.draft):  # a last full read of our branches
            for entry in self.own_entries(branch):
                self.read_back(branch, entry)


def hammer(args: argparse.Namespace) -> dict:
    repo = Lake(args.metastore).repository(args.repo)
    h = Hammer(repo, args.index, args.seed)
    started = time.monotonic()
    h.run(args.stop, args.max_seconds, args.pause)
    return {
        "writer": h.me,
        "seconds": round(time.monotonic() - started, 1),
        "ops": dict(h.ops),
        "total_ops": sum(n for k, n in h.ops.items() if "(" not in k),
        "errors": h.errors,
        "live_tokens": h.live_tokens,
        "commits": h.commits,
    }


def ops(args: argparse.Namespace) -> dict:
    repo = Lake(args.metastore).repository(args.repo)
    results = []
    for name, *call in json.loads(args.ops):
        if name == "upload":
            branch, path, text = call
            result = repo.upload(branch, path, text.encode()).address
        elif name in ("commit", "merge", "revert"):
            result = getattr(repo, name)(*call).id
        elif name == "copy":
            result = repo.copy(*call).address
        else:  # create_branch, create_tag, delete_branch, reset_branch, remove
            getattr(repo, name)(*call)
            result = None
        results.append(result)
    return {"results": results}


def lease(args: argparse.Namespace) -> dict:
    from lakegc.repogc.lease import Lease, LeaseHeld

    lake = Lake(args.metastore)
    lake.metastore.ensure_schema()
    open(args.ready, "w").close()
    while not os.path.exists(args.go):
        time.sleep(0.002)
    try:
        with Lease(lake.metastore, args.repo, args.run_id):
            at = utcnow().isoformat()
            time.sleep(args.hold)
            return {"run_id": args.run_id, "acquired": True, "at": at}
    except LeaseHeld as exc:
        return {"run_id": args.run_id, "acquired": False, "error": str(exc)}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("hammer")
    p.add_argument("metastore")
    p.add_argument("repo")
    p.add_argument("index", type=int)
    p.add_argument("--stop", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pause", type=float, default=0.01, help="mean pause between operations, seconds")
    p.add_argument("--max-seconds", type=float, default=240)
    p = sub.add_parser("ops")
    p.add_argument("metastore")
    p.add_argument("repo")
    p.add_argument("ops")
    p = sub.add_parser("lease")
    p.add_argument("metastore")
    p.add_argument("repo")
    p.add_argument("run_id")
    p.add_argument("--go", required=True)
    p.add_argument("--ready", required=True, help="touched once waiting for --go")
    p.add_argument("--hold", type=float, default=2.0)
    args = parser.parse_args()
    try:
        report = {"hammer": hammer, "ops": ops, "lease": lease}[args.mode](args)
    except LakegcError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise
    print(json.dumps(report))


if __name__ == "__main__":
    main()
