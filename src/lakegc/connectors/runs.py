"""Where connector runs are kept: a folder of their own (`engine.runs.FolderRunLog`), never the
lakes they clean. How a connector run goes is the engine's (`engine.collector`)."""

from __future__ import annotations

from lakegc.settings import lakegc_home, load_settings


def default_runs_location() -> str:
    """`LAKEGC_RUNS`, else the settings file's `runs`, else `$LAKEGC_HOME/runs`."""
    return load_settings().runs or str(lakegc_home() / "runs")
