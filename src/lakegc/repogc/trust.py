"""Trust in tree files, carried from one run to the next (docs/safety.md, "Trust between runs").

Reading a range or metarange means checking that its bytes hash to its id: on S1 that is 7M
entries hashed every run. A run that verified a tree file records it with its *facts*, what the
store says of it without reading it (`Storage.facts`: local size, mtime and ctime in nanoseconds,
inode and device; S3 ETag, size and LastModified). A later run trusts the file while its facts
are still those: any rewrite changes one of them (nobody can set a ctime back; a file renamed into
place is another inode; a PUT is a new LastModified), so a file changed after it was verified is
verified again. Executors compare the facts of the bytes they actually read (`read_with_facts`),
never the driver's earlier look, so a file swapped mid-run is verified too.

The record names every tree file its run relied on (each with its facts, or None: "verify next
time") and lives in the run's reference set, whose manifest digest the metastore holds: a missing,
unreadable, changed or foreign record means "verify", never "trust".

What gets recorded (`next_record`) are the facts the file had both before the run read anything
and after it had read everything: a file changed in between is recorded None.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lakegc.errors import LakegcError
from lakegc.repo.trees import METARANGES_PREFIX, RANGES_PREFIX, read_metarange, read_range
from lakegc.storage import Storage

TRUST = "refs/trust.parquet"  # under the run's folder
_SCHEMA = pa.schema([("key", pa.string()), ("facts", pa.string())])
_VERIFY_THREADS = 8  # tree files verified at once on the driver (I/O bound on S3; hashing frees the GIL)


class RecordUnusable(LakegcError):
    """A trust record that cannot be believed: its run's tree files are all verified again."""


@dataclass(frozen=True)
class TrustRecord:
    """Tree-file key -> its facts when a run last verified it (None: verify it next time)."""

    facts: Mapping[str, str | None]
    namespace: str

    def trusted(self, now: Mapping[str, str]) -> dict[str, str]:
        """The recorded files whose facts are still the recorded ones (`now`: `tree_facts`)."""
        return {key: facts for key, facts in self.facts.items() if facts is not None and now.get(key) == facts}

    def changed(self, now: Mapping[str, str]) -> list[str]:
        """The recorded files that are not trusted now: changed, gone, or never settled."""
        return sorted(key for key, facts in self.facts.items() if facts is None or now.get(key) != facts)


def next_record(known: Iterable[str], before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str | None]:
    """Every tree file a run relied on (`known`), with the facts it had both before the run read
    anything and after it had read everything; None when they differ (it changed meanwhile)."""
    return {key: after[key] if key in after and before.get(key) == after[key] else None for key in known}


def tree_keys(metaranges: Iterable[str], ranges: Iterable[str]) -> list[str]:
    return [*(METARANGES_PREFIX + mid for mid in metaranges), *(RANGES_PREFIX + rid for rid in ranges)]


def write_record(storage: Storage, key: str, record: Mapping[str, str | None]) -> str:
    """Write the record at `key`; returns its SHA-256, for the manifest that names it."""
    keys = sorted(record)
    table = pa.table({"key": keys, "facts": [record[k] for k in keys]}, schema=_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata({"namespace": storage.uri}), sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    storage.write(key, data)
    return hashlib.sha256(data).hexdigest()


def read_record(storage: Storage, key: str, sha256: str) -> TrustRecord:
    """The record at `key`, when it is the one its manifest names (`sha256`); else RecordUnusable.
    A record written at another namespace URI (a lake copied or moved since) names the same files
    and trusts none of them: each is verified again."""
    try:
        data = storage.read(key)
    except (LakegcError, OSError) as exc:
        raise RecordUnusable(f"its record of verified tree files is missing ({exc})") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RecordUnusable("its record of verified tree files was changed since it was written")
    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read()
        namespace = (table.schema.metadata or {}).get(b"namespace", b"").decode()
        facts = dict(zip(table.column("key").to_pylist(), table.column("facts").to_pylist()))
    except (pa.ArrowException, KeyError, ValueError) as exc:
        raise RecordUnusable(f"its record of verified tree files is unreadable ({exc})") from None
    if namespace != storage.uri:  # the namespace was copied or moved: the same files, none of them trusted
        return TrustRecord(dict.fromkeys(facts), storage.uri)
    return TrustRecord(facts, namespace)


def verify_files(storage: Storage, keys: list[str]) -> None:
    """Read and verify tree files on the driver, in threads (a run that trusts the rest has few
    left to check); a file that fails raises CorruptMetadata, before anything is deleted."""

    def verify(key: str) -> None:
        if key.startswith(RANGES_PREFIX):
            read_range(storage, key.removeprefix(RANGES_PREFIX))
        else:
            read_metarange(storage, key.removeprefix(METARANGES_PREFIX))

    with ThreadPoolExecutor(_VERIFY_THREADS) as pool:
        list(pool.map(verify, keys))
