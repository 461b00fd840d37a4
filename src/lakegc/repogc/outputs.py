"""The folder of a repository run, `_lakegc/gc/<run>/` in the namespace, and the files in it.

summary.json, report.html       the run's record (engine.runs)
candidates/, to_delete/,        Parquet outputs of the mark and the sweep
  revived/, deleted/round-N/
active_commits.json             the commits the mark counted active
staging.json                    where staging stood at the mark (the sweep re-checks what came after)
uncommitted/part-0.parquet      the uncommitted snapshot (staged entries, copy records, live tokens)
settled_slices.json             slices no object can land in any more (incremental runs skip them)
refs/                           the reference set (gc.refset), manifest.json last
"""

from __future__ import annotations

from lakegc.engine.runs import RunFolder
from lakegc.storage import Storage

RUNS_PREFIX = "_lakegc/gc/"
ACTIVE_COMMITS = "active_commits.json"
ACTIVE_BY_PATH_RULE = "active_by_path_rule.json"  # with path rules: the commits active under each rule
SETTLED = "settled_slices.json"
STAGING = "staging.json"
UNCOMMITTED = "uncommitted/part-0.parquet"
MANIFEST = "refs/manifest.json"
BASE_OUTPUTS = ("summary.json", ACTIVE_COMMITS, UNCOMMITTED, SETTLED, MANIFEST)  # what an incremental run reads


def run_prefix(run_id: str) -> str:
    return f"{RUNS_PREFIX}{run_id}/"


def run_folder(storage: Storage, run_id: str) -> RunFolder:
    return RunFolder(storage, run_prefix(run_id))


def output_keys(storage: Storage, run_id: str, name: str) -> list[str]:
    """The Parquet parts of one output (`candidates`, `deleted`, ...) of a run."""
    return run_folder(storage, run_id).parts(name)


def uncommitted_key(run_id: str) -> str:
    return run_prefix(run_id) + UNCOMMITTED
