"""A delete batch in quarantine mode (issue 21's restore window): every candidate leaves its
address for the run's quarantine folder, counted as collected; metadata keys are still refused,
and nothing outside the quarantine folder is written."""

from __future__ import annotations

from pathlib import Path

from lakegc.engine.delete import Pacing, _delete_batch, quarantine_folder
from lakegc.storage import LocalStorage
from lakegc.timeutil import utcnow


def test_a_quarantined_batch_moves_each_candidate_and_refuses_metadata(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "ns")
    storage.prepare()
    keys = ["data/s1/a", "data/s1/b", "data/s2/c"]
    for key in [*keys, "_lakegc/ranges/r1"]:
        storage.write(key, key.encode())
    rows = [
        {"address": k, "size": 1, "mtime": utcnow(), "reason": "unreferenced"} for k in [*keys, "_lakegc/ranges/r1"]
    ]
    batch = _delete_batch(storage, rows, Pacing(quarantine=quarantine_folder("r1")))
    outcome = dict(zip(batch.column("address").to_pylist(), batch.column("deleted").to_pylist(), strict=True))
    assert outcome == {"data/s1/a": True, "data/s1/b": True, "data/s2/c": True, "_lakegc/ranges/r1": False}
    assert sorted(o.key for o in storage.list()) == sorted(
        ["_lakegc/ranges/r1", *(f"_lakegc/quarantine/r1/{k}" for k in keys)]
    )
