"""Moving objects inside a local namespace (a run's quarantine, and back): never replacing what is
at the destination, never through a symlink at either end, and completing a move a crash cut
between its link and its unlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakegc.storage import LocalStorage


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    ns = LocalStorage(tmp_path / "ns")
    ns.prepare()
    for key in ("data/s1/a", "data/s1/b", "data/s2/c"):
        ns.write(key, key.encode())
    return ns


def q(key: str) -> str:
    return f"_lakegc/quarantine/run-1/{key}"


def test_objects_move_to_their_destination_and_back(storage: LocalStorage) -> None:
    outcomes = storage.move_many([(k, q(k)) for k in ("data/s1/a", "data/s1/b", "data/s2/c")])
    assert [(o.key, o.ok) for o in outcomes] == [("data/s1/a", True), ("data/s1/b", True), ("data/s2/c", True)]
    assert not storage.exists("data/s1/a") and storage.read(q("data/s1/a")) == b"data/s1/a"
    assert all(o.ok for o in storage.move_many([(q("data/s1/a"), "data/s1/a")]))
    assert storage.read("data/s1/a") == b"data/s1/a" and not storage.exists(q("data/s1/a"))


def test_an_object_at_the_destination_is_never_replaced(storage: LocalStorage) -> None:
    storage.write(q("data/s1/a"), b"someone else's")
    [outcome] = storage.move_many([("data/s1/a", q("data/s1/a"))])
    assert not outcome.ok and "already holds another object" in outcome.error
    assert storage.read("data/s1/a") == b"data/s1/a" and storage.read(q("data/s1/a")) == b"someone else's"


def test_a_move_cut_between_link_and_unlink_completes_on_a_retry(storage: LocalStorage) -> None:
    os.makedirs(storage.root / "_lakegc/quarantine/run-1/data/s1")
    os.link(storage.root / "data/s1/a", storage.root / q("data/s1/a"))  # the crash: linked, not unlinked
    assert all(o.ok for o in storage.move_many([("data/s1/a", q("data/s1/a"))]))
    assert not storage.exists("data/s1/a") and storage.read(q("data/s1/a")) == b"data/s1/a"
    assert all(o.ok for o in storage.move_many([("data/s1/a", q("data/s1/a"))]))  # and again: nothing left to do


def test_a_missing_source_is_no_error_and_moves_nothing(storage: LocalStorage) -> None:
    assert all(o.ok for o in storage.move_many([("data/s9/gone", q("data/s9/gone"))]))
    assert not storage.exists(q("data/s9/gone"))


def test_a_symlinked_source_folder_is_refused_and_what_it_points_at_stays(
    storage: LocalStorage, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x").write_bytes(b"not ours")
    os.symlink(outside, storage.root / "data/linked")
    [outcome] = storage.move_many([("data/linked/x", q("data/linked/x"))])
    assert not outcome.ok and "symlink" in outcome.error
    assert (outside / "x").read_bytes() == b"not ours" and not storage.exists(q("data/linked/x"))


def test_a_symlink_planted_as_the_destination_folder_is_refused(storage: LocalStorage, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.makedirs(storage.root / "_lakegc/quarantine")
    os.symlink(elsewhere, storage.root / "_lakegc/quarantine/run-1")
    [outcome] = storage.move_many([("data/s1/a", q("data/s1/a"))])
    assert not outcome.ok and "symlink" in outcome.error
    assert storage.read("data/s1/a") == b"data/s1/a" and list(elsewhere.iterdir()) == []


def test_a_symlink_as_the_object_is_not_moved(storage: LocalStorage, tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"t")
    os.symlink(tmp_path / "target", storage.root / "data/s1/link")
    [outcome] = storage.move_many([("data/s1/link", q("data/s1/link"))])
    assert not outcome.ok and "not a regular file" in outcome.error
    assert os.path.islink(storage.root / "data/s1/link") and (tmp_path / "target").read_bytes() == b"t"


@pytest.mark.parametrize("bad", [("../x", "_lakegc/q/x"), ("data/s1/a", "../escape"), ("data/s1/a", "/abs")])
def test_keys_that_would_leave_the_namespace_fail_alone(storage: LocalStorage, bad: tuple[str, str]) -> None:
    outcomes = storage.move_many([bad, ("data/s2/c", q("data/s2/c"))])
    assert [o.ok for o in outcomes] == [False, True]
    assert storage.read("data/s1/a") == b"data/s1/a"
    assert not (storage.root.parent / "escape").exists()
