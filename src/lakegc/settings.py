"""Settings a site sets once: `$LAKEGC_HOME/config.toml`, then the environment, then the command line.

    # $LAKEGC_HOME/config.toml (every key optional)
    metastore = "postgresql+psycopg://gc@db.internal/lakegc"
    runs = "s3://ops-bucket/lakegc-runs"      # where connector runs keep their folders

    [spark]
    master = "spark://spark-master:7077"

    [spark.conf]
    "spark.executor.memory" = "8g"

    [gc]
    min_age = "24h"                           # gc run's default --min-age

What a flag says wins over the environment (`LAKEGC_METASTORE`, `LAKEGC_SPARK_MASTER` or
`LAKEGC_REMOTE`, a Spark Connect server, which wins over it; `LAKEGC_RUNS`, `LAKEGC_MIN_AGE`),
which wins over the file, which wins over lakegc's defaults.
`--conf KEY=VALUE` adds to (and for the same key replaces) the file's Spark conf. A file that is
not valid TOML, or that names a key lakegc does not know (a typo would otherwise go unnoticed), is
refused with one `error:` line naming it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from lakegc.errors import InvalidArgument

if TYPE_CHECKING:
    from lakegc.settings_file import Settings

CONFIG_FILE = "config.toml"


def lakegc_home() -> Path:
    return Path(os.environ.get("LAKEGC_HOME") or Path.home() / ".lakegc")


def config_path() -> Path:
    return lakegc_home() / CONFIG_FILE


def load_settings() -> Settings:
    """The file's settings (none when there is no file) with the environment's on top."""
    metastore, master, runs, min_age = (os.environ.get(name) for name in _ENV)
    remote = os.environ.get("LAKEGC_REMOTE")  # a Spark Connect server: sc://HOST:PORT
    if remote and not remote.startswith("sc://"):
        raise InvalidArgument(f"LAKEGC_REMOTE={remote!r}: a Spark Connect address is sc://HOST:PORT")
    from lakegc.settings_file import load

    return load(str(config_path()), metastore, remote or master, runs, min_age)


def configured_metastore() -> str | None:
    """`load_settings().metastore`, what every command asks first. When there is nothing to
    validate (no settings file, no LAKEGC_MIN_AGE or LAKEGC_REMOTE) it is the environment's, and
    pydantic, half the start of a `lakegc log`, is not loaded."""
    if os.path.lexists(config_path()) or any(os.environ.get(name) for name in ("LAKEGC_MIN_AGE", "LAKEGC_REMOTE")):
        return load_settings().metastore
    return os.environ.get("LAKEGC_METASTORE") or None


_ENV = ("LAKEGC_METASTORE", "LAKEGC_SPARK_MASTER", "LAKEGC_RUNS", "LAKEGC_MIN_AGE")
