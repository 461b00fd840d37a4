"""lakegc's Python API: everything the `lakegc` command does, for a scheduler, a notebook or a
service that should not shell out. The CLI is a thin layer over these functions.

    import lakegc

    run = lakegc.gc("lake", dry_run=True)              # a Run: what it found, what it deleted
    print(run.num_candidates, run.bytes_candidates)
    run = lakegc.gc("lake")                            # mark and sweep
    for r in lakegc.runs("lake"):                      # newest first
        print(r.run_id, r.state, r.num_deleted)

Every function takes the metastore as `metastore=` (a SQLAlchemy URL or an open `Lake`; default:
`LAKEGC_METASTORE`, else `$LAKEGC_HOME/config.toml`'s `metastore`, else the SQLite file in
`$LAKEGC_HOME`). Durations are `timedelta`s or the CLI's text (`24h`, `7d`, `P7D`). Spark's master
(`master=`, or `remote=` a Spark Connect address `sc://HOST:PORT`) and conf default to the settings
file's, then a running warm engine (`lakegc engine start`), then local mode. A run's progress can be followed with
`progress=`, called as each phase starts with its name and a detail. Errors are raised as
`lakegc.errors.LakegcError` subclasses whose message is the CLI's one-line `error:`.

The functions live by what they collect: `lakegc.api.repository` (a repository's GC, its runs and
rules) and `lakegc.api.connectors` (Iceberg, catalog and Delta GC, and the connectors' runs), with
`lakegc.api.common` for what both use. Import them from here.
"""

from __future__ import annotations

# Imported, not the API (so not in `__all__`, which `import lakegc` exposes): names the single-module
# API had as attributes, kept so that `lakegc.api.X` goes on working for each of them.
from collections.abc import Iterable, Iterator  # noqa: F401
from dataclasses import dataclass  # noqa: F401
from datetime import datetime, timedelta  # noqa: F401
from typing import TYPE_CHECKING  # noqa: F401

import pyarrow.parquet as pq  # noqa: F401

from lakegc.api.common import Candidate, CandidateFilter, Duration, Metastore, duration, open_lake
from lakegc.api.connectors import (
    catalog_gc,
    connector_candidates,
    connector_folder,
    connector_run,
    connector_runs,
    delta_files,
    delta_gc,
    iceberg_gc,
)
from lakegc.api.lakefs import lakefs_addresses, lakefs_gc, lakefs_restore, lakefs_runs
from lakegc.api.repository import (
    REPOSITORY_REASONS,
    candidates,
    delete_rules,
    explain,
    failures,
    gc,
    get_rules,
    purge,
    restore,
    run,
    runs,
    set_rules,
    simulate,
    sweep,
)
from lakegc.api.warehouse import warehouse_files, warehouse_gc, warehouse_restore
from lakegc.engine.collector import RunOptions  # noqa: F401
from lakegc.engine.delete import Budget  # noqa: F401
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.runs import FolderRunLog, MetastoreRunLog, Run, RunFolder  # noqa: F401
from lakegc.errors import InvalidArgument  # noqa: F401
from lakegc.repo.gc_source import address_key, namespace_key  # noqa: F401
from lakegc.repo.repository import Lake, Repository
from lakegc.repogc.explain import Explanation, Reason, Verdict
from lakegc.repogc.quarantine import Purged, Restored
from lakegc.repogc.simulate import CurvePoint, RetentionCurve
from lakegc.retention.rules import (
    GcRules,
    parse_rules,  # noqa: F401
)
from lakegc.settings import load_settings  # noqa: F401
from lakegc.timeutil import parse_duration, utcnow  # noqa: F401

__all__ = [
    # the repository API (lakegc.api.repository)
    "gc",
    "explain",
    "simulate",
    "sweep",
    "restore",
    "purge",
    "runs",
    "run",
    "candidates",
    "failures",
    "get_rules",
    "set_rules",
    "delete_rules",
    "REPOSITORY_REASONS",
    # the connectors' API (lakegc.api.connectors)
    "iceberg_gc",
    "catalog_gc",
    "delta_gc",
    "delta_files",
    "connector_runs",
    "connector_run",
    "connector_folder",
    "connector_candidates",
    # a real lakeFS installation's repository (lakegc.api.lakefs)
    "lakefs_gc",
    "lakefs_addresses",
    "lakefs_restore",
    "lakefs_runs",
    # one live set for a whole warehouse (lakegc.api.warehouse)
    "warehouse_gc",
    "warehouse_files",
    "warehouse_restore",
    # shared (lakegc.api.common)
    "open_lake",
    "duration",
    "Duration",
    "Metastore",
    "Candidate",
    "CandidateFilter",
    # the types the functions take and return
    "CurvePoint",
    "Explanation",
    "GcRules",
    "Lake",
    "Phase",
    "Purged",
    "Reason",
    "Repository",
    "Restored",
    "RetentionCurve",
    "Run",
    "RunFolder",
    "Verdict",
    "no_progress",
]
