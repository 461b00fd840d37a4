"""The settings file's schema (`lakegc.settings` says where settings come from), validated with
pydantic: loaded only when there is a file or a value to check."""

from __future__ import annotations

import tomllib

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lakegc.errors import InvalidArgument, first_problem
from lakegc.timeutil import parse_duration

DEFAULT_MIN_AGE = "24h"


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


def load(path: str, metastore: str | None, master: str | None, runs: str | None, min_age: str | None) -> Settings:
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
