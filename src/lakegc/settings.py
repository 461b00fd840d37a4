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
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lakegc.errors import InvalidArgument, first_problem
from lakegc.timeutil import parse_duration

CONFIG_FILE = "config.toml"
DEFAULT_MIN_AGE = "24h"


def lakegc_home() -> Path:
    return Path(os.environ.get("LAKEGC_HOME") or Path.home() / ".lakegc")


class SparkSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    master: str | None = None
    conf: dict[str, str] = Field(default_factory=dict)


class GcSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min_age: str = DEFAULT_MIN_AGE

    @field_validator("min_age")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)  # a bad duration is refused when the file is read, not mid-run
        return value


class Settings(BaseModel):
    """What the file and the environment say (None: not set, lakegc's default applies)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    metastore: str | None = None
    runs: str | None = None
    spark: SparkSettings = SparkSettings()
    gc: GcSettings = GcSettings()

    def master(self, given: str | None, remote: str | None = None) -> str | None:
        """The Spark master: the flag's (`--master`, or `--remote`'s Spark Connect address), else the
        settings' (None: a warm engine if one answers, else local mode)."""
        return spark_address(given, remote) or self.spark.master

    def spark_conf(self, given: dict[str, str] | None) -> dict[str, str]:
        return {**self.spark.conf, **(given or {})}


def spark_address(master: str | None, remote: str | None) -> str | None:
    """The Spark a command or call runs on: `master`, or `remote` (a Spark Connect server), not both."""
    if remote is None:
        return master
    if master is not None:
        raise InvalidArgument("--master and --remote both given: a command runs on one Spark")
    if not remote.startswith("sc://"):
        raise InvalidArgument(f"--remote {remote!r}: a Spark Connect address is sc://HOST:PORT")
    return remote


def config_path() -> Path:
    return lakegc_home() / CONFIG_FILE


def load_settings() -> Settings:
    """The file's settings (none when there is no file) with the environment's on top."""
    metastore, master, runs, min_age = (os.environ.get(name) for name in _ENV)
    remote = os.environ.get("LAKEGC_REMOTE")  # a Spark Connect server: sc://HOST:PORT
    if remote and not remote.startswith("sc://"):
        raise InvalidArgument(f"LAKEGC_REMOTE={remote!r}: a Spark Connect address is sc://HOST:PORT")
    return _load(str(config_path()), metastore, remote or master, runs, min_age)


_ENV = ("LAKEGC_METASTORE", "LAKEGC_SPARK_MASTER", "LAKEGC_RUNS", "LAKEGC_MIN_AGE")


def _load(path: str, metastore: str | None, master: str | None, runs: str | None, min_age: str | None) -> Settings:
    doc: dict = {}
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        pass
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"settings file {path} cannot be read: {exc}") from None
    env = {"metastore": metastore, "runs": runs}
    doc.update({k: v for k, v in env.items() if v})
    if master:
        doc["spark"] = {**doc.get("spark", {}), "master": master}
    if min_age:
        doc["gc"] = {**doc.get("gc", {}), "min_age": min_age}
    try:
        return Settings.model_validate(doc)
    except ValidationError as exc:
        raise InvalidArgument(f"settings file {path}: {first_problem(exc, 'the file')}") from None
    except InvalidArgument as exc:
        raise InvalidArgument(f"settings file {path}: {exc}") from None
