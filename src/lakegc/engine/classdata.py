"""Class-data sharing for Spark's driver JVM: an archive of the classes a GC run loads, mapped by
later runs instead of loaded, parsed and verified from Spark's jars one by one.

Loading Spark's classes is most of what starting Spark costs: with the archive, a session and its
first few small jobs took 7 s of CPU instead of 12 s, and a GC run of the demo lake 14 s instead of
21 s. The archive (about 170 MB, in the user's cache) is the JVM's own, a dynamic AppCDS archive
(`-XX:ArchiveClassesAtExit`), written once per machine, Java runtime and set of Spark jars by the
first `lakegc` command that starts Spark without one: its JVM writes the archive as it exits, and
the command waits for that (seconds, once), checks the archive maps, and moves it into place.
Only whole archives are ever used: a truncated one crashes the
JVM that maps it (SIGBUS), so an archive is installed by rename, carries its size in its name, and is
passed over when its size differs. One that does not match the JVM's class path or flags is refused
by the JVM itself, which then loads classes the usual way (its CDS warnings are off: the JVM prints
them on stdout, where `--json` output goes).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

QUIET = "-Xlog:cds*=off"  # CDS warnings go to the JVM's stdout: the command's own output
_STALE_TMP_SECONDS = 3600  # an unfinished archive this old belongs to a command that died
# Another runtime's or Spark's archive this old is removed when a new one is installed: most likely
# of a version since upgraded (two installs in use on one machine each keep theirs for this long).
_UNUSED_SECONDS = 30 * 86400
# What the Spark launcher adds to the class path besides its jars: a JVM asked to write an archive
# refuses to start when the class path holds a folder with files in it.
_CLASSPATH_ADDITIONS = ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH", "SPARK_CLASSPATH")


def cache_dir(env: dict[str, str]) -> Path:
    """The user's cache (not lakegc's home: every lakegc home on the machine shares the archive)."""
    return Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache") / "lakegc"


@dataclass(frozen=True)
class Archive:
    """The archive slot of one Java runtime and one set of Spark jars."""

    folder: Path
    key: str

    def installed(self) -> Path | None:
        """The installed archive, if its size is the one it was installed with."""
        try:
            found = sorted(self.folder.glob(f"spark-{self.key}-*.jsa"))
        except OSError:
            return None
        for path in found:
            size = path.stem.rpartition("-")[2]
            try:
                if size.isdigit() and path.stat().st_size == int(size):
                    return path
            except OSError:
                continue
        return None

    def new_tmp(self) -> Path:
        """Where this process's JVM writes a new archive as it exits (then checked by `install`)."""
        return self.folder / f"spark-{self.key}.{os.getpid()}.tmp"

    def install(self, tmp: Path, java: str, classpath: str) -> Path | None:
        """Move a written archive into place once a JVM with the same class path maps it without
        error (`-Xshare:on` fails instead of falling back; one cut short crashes it, which leaves no
        crash report behind); older archives go. None when it does not."""
        try:
            checked = subprocess.run(
                [
                    java,
                    "-Xshare:on",
                    f"-XX:SharedArchiveFile={tmp}",
                    QUIET,
                    "-XX:+SuppressFatalErrorMessage",
                    "-cp",
                    classpath,
                    "-version",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=120,
            )
            if checked.returncode != 0:
                return None
            final = self.folder / f"spark-{self.key}-{tmp.stat().st_size}.jsa"
            os.replace(tmp, final)
        except (OSError, subprocess.SubprocessError):
            return None
        finally:
            tmp.unlink(missing_ok=True)
        for other in self.folder.glob("spark-*.jsa"):
            if other != final and (other.name.startswith(f"spark-{self.key}-") or _age(other) > _UNUSED_SECONDS):
                other.unlink(missing_ok=True)
        return final

    def clear_stale(self) -> None:
        """Unfinished archives of commands that died while their JVM wrote one."""
        for tmp in self.folder.glob("spark-*.tmp"):
            if _age(tmp) > _STALE_TMP_SECONDS:
                tmp.unlink(missing_ok=True)


def archive_for(spark_home: Path, env: dict[str, str]) -> Archive | None:
    """The archive slot of the Java runtime the Spark launcher will pick (JAVA_HOME, else `java` on
    the PATH) and of Spark's jars: keyed by their paths, sizes and times, so an upgrade of either
    gets a new archive. None when either cannot be found."""
    java = java_command(env)
    jars = spark_home / "jars"
    if java is None or not jars.is_dir():
        return None
    real_java = Path(os.path.realpath(java))
    parts = [str(real_java), *_stamp(real_java), *_stamp(real_java.parent.parent / "lib" / "modules")]
    for jar in sorted(jars.iterdir()):
        parts += [jar.name, *_stamp(jar)]
    return Archive(cache_dir(env), hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16])


def java_command(env: dict[str, str]) -> str | None:
    """The `java` the Spark launcher (bin/spark-class) runs."""
    if env.get("JAVA_HOME"):
        return os.path.join(env["JAVA_HOME"], "bin", "java")
    return shutil.which("java", path=env.get("PATH"))


def can_record(spark_home: Path, env: dict[str, str], conf: dict[str, str]) -> bool:
    """Whether the driver's class path will hold only jars, as writing an archive requires (the
    launcher adds SPARK_HOME/conf when SPARK_CONF_DIR is unset; pip's pyspark has none)."""
    conf_dir = spark_home / "conf"
    return (
        not any(env.get(name) for name in _CLASSPATH_ADDITIONS)
        and not conf.get("spark.driver.extraClassPath")
        and not (conf_dir.is_dir() and any(conf_dir.iterdir()))
    )


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _stamp(path: Path) -> list[str]:
    try:
        st = path.stat()
    except OSError:
        return ["-"]
    return [str(st.st_size), str(st.st_mtime_ns)]
