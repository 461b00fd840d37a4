"""How lakegc starts Spark: the class-data archive the first command leaves for the others, used only
whole, never in the way of a run (a broken one is dropped), and never on the command's stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from lakegc.demo import RULES, build_demo
from lakegc.engine import classdata
from lakegc.repo.repository import Lake
from lakegc.retention.rules import GcRules


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def launcher_jar() -> str:
    return str(next((spark_home() / "jars").glob("spark-launcher_*.jar")))


def small_archive(path: Path) -> Path:
    """A real (small) archive: the classes of Spark's launcher, as a JVM writes them when it exits."""
    java = classdata.java_command(dict(os.environ))
    subprocess.run(
        [
            java,
            f"-XX:ArchiveClassesAtExit={path}",
            classdata.QUIET,
            "-cp",
            launcher_jar(),
            "org.apache.spark.launcher.Main",
        ],
        capture_output=True,
        cwd=path.parent,
        timeout=120,
    )
    assert path.stat().st_size > 0
    return path


def test_an_archive_counts_as_installed_only_at_the_size_it_was_installed_with(tmp_path: Path):
    archive = classdata.Archive(tmp_path, "k")
    (tmp_path / "spark-k-100.jsa").write_bytes(b"x" * 99)  # cut short: mapping it would crash the JVM
    (tmp_path / "spark-other-3.jsa").write_bytes(b"xyz")  # another runtime's
    assert archive.installed() is None
    (tmp_path / "spark-k-100.jsa").write_bytes(b"x" * 100)
    assert archive.installed() == tmp_path / "spark-k-100.jsa"


def test_an_archive_is_installed_only_once_a_jvm_maps_it(tmp_path: Path):
    archive = classdata.Archive(tmp_path, "k")
    java = classdata.java_command(dict(os.environ))
    whole = small_archive(tmp_path / "whole.tmp")
    cut = tmp_path / "cut.tmp"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])

    assert archive.install(cut, java, launcher_jar()) is None
    assert not cut.exists() and archive.installed() is None

    size = whole.stat().st_size
    assert archive.install(whole, java, launcher_jar()) == tmp_path / f"spark-k-{size}.jsa"
    assert not whole.exists() and archive.installed() == tmp_path / f"spark-k-{size}.jsa"


def test_spark_starts_without_an_archive_that_crashes_the_jvm(tmp_path: Path):
    """An archive cut short after it was installed (it carries the size it has now) makes the JVM
    die as it starts (SIGBUS): the session starts again without it, and it is gone."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    archive = classdata.archive_for(spark_home(), env)
    assert archive is not None
    archive.folder.mkdir(parents=True)
    whole = small_archive(tmp_path / "whole.jsa")
    cut = whole.read_bytes()[: whole.stat().st_size // 2]
    broken = archive.folder / f"spark-{archive.key}-{len(cut)}.jsa"
    broken.write_bytes(cut)

    script = "from lakegc.engine.spark import spark_session; print('rows', spark_session().range(3).count())"
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )  # a hang guard
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "rows 3"
    assert not broken.exists()


@pytest.fixture
def demo_env(tmp_path: Path) -> dict[str, str]:
    lake = Lake(f"sqlite:///{tmp_path / 'lakegc.db'}")
    demo = build_demo(lake, tmp_path / "namespace")
    demo.repo.set_gc_rules(GcRules.model_validate(RULES))
    return {
        **os.environ,
        "LAKEGC_HOME": str(tmp_path / "home"),
        "LAKEGC_METASTORE": f"sqlite:///{tmp_path / 'lakegc.db'}",
        "XDG_CACHE_HOME": str(tmp_path / "a cache"),
    }  # a space: every JVM option naming it is quoted


@pytest.mark.slow  # several JVMs started and stopped: the CI runs it in its second step (./dev test)
def test_the_first_gc_run_leaves_the_archive_the_next_one_uses(demo_env: dict[str, str], tmp_path: Path):
    def gc_run(*args: str) -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "lakegc", "gc", "run", "lakegc://demo", *args, "--json"],
            capture_output=True,
            text=True,
            env=demo_env,
            timeout=600,
        )  # a hang guard
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)  # the whole of stdout: nothing from the JVM, which writes its archive there

    assert gc_run("--dry-run")["state"] == "marked"
    archive = classdata.archive_for(spark_home(), demo_env)
    assert archive is not None
    installed = archive.installed()
    assert installed is not None and installed.parent == tmp_path / "a cache" / "lakegc"
    assert sorted(p.name for p in installed.parent.iterdir()) == [installed.name]  # no unfinished archive left

    summary = gc_run("--min-age", f"{timedelta(0).total_seconds():.0f}s")
    assert (summary["state"], summary["num_deleted"]) == ("swept", 10)
    assert archive.installed() == installed
