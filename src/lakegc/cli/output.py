"""How results look: exactly one JSON document with --json, rich tables otherwise; errors as one line.

Everything printed here has its credentials masked (`lakegc.redact`), and what a terminal shows has
its control characters escaped: an object named `\x1b[2J` is listed as written, not obeyed."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from lakegc.redact import mask_doc, shown
from lakegc.timeutil import epoch_seconds, shown_time

if TYPE_CHECKING:
    from rich.console import Console

    from lakegc.api import Candidate
    from lakegc.engine.runs import Run
    from lakegc.repo.model import Branch, Change, Commit, Entry, RepositoryInfo, Tag
    from lakegc.repo.repository import Repository

_verbosity = [1]  # 0: -q, 1: normal, 2: -v


@functools.cache
def _consoles() -> tuple[Console, Console]:
    """stdout's and stderr's rich consoles, made when something is first printed: rich is a fifth
    of a command's start, and a `--json` command never needs it."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True), Console(stderr=True, highlight=False)


def __getattr__(name: str) -> Console:
    """`output.console` and `output.err_console`, made on first use (`_consoles`)."""
    if name in ("console", "err_console"):
        return _consoles()[name == "err_console"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def set_verbosity(level: int) -> None:
    _verbosity[0] = level


def verbosity() -> int:
    return _verbosity[0]


def fail(message: str, code: int = 1) -> NoReturn:
    """The one place a user-facing error is printed: a single `error:` line, no traceback. A
    newline inside it (a name's, say) is escaped, not a second line."""
    _consoles()[1].print(f"error: {shown(message.strip())}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """A risk the user chose: said once on stderr, the command goes on."""
    _consoles()[1].print(f"warning: {shown(message.strip())}", markup=False, soft_wrap=True)


def say(message: str, *, err: bool = False) -> None:
    """A line of plain text for people (stdout, or stderr with `err`), names shown as written."""
    _consoles()[err].print(shown(message), markup=False, highlight=False, soft_wrap=True)


def emit_json(doc: Any) -> None:
    """One JSON document (json.dumps escapes control characters itself)."""
    sys.stdout.write(json.dumps(mask_doc(doc), indent=2) + "\n")
    sys.stdout.flush()  # under spark-submit the JVM may outlive an unflushed Python child


def emit_json_with_list(doc: dict[str, Any], key: str, items: Iterable[str]) -> None:
    """`doc` with `key` holding `items`, as `emit_json` prints it, the list written as it comes
    (a list of a million paths is never held whole)."""
    head = json.dumps(mask_doc(doc), indent=2)
    body = head[: head.rstrip().rfind("}")].rstrip()
    sys.stdout.write(body + ("," if doc else "") + f"\n  {json.dumps(key)}: [")
    first = True
    for item in items:
        sys.stdout.write(("\n    " if first else ",\n    ") + json.dumps(item))
        first = False
    sys.stdout.write("]\n}\n" if first else "\n  ]\n}\n")
    sys.stdout.flush()


def table(*columns: str, rows: list[list[Any]], title: str | None = None) -> None:
    """Rows under a header. On a terminal, a table that fits its width; in a pipe or a log, one
    line per row with its columns aligned, whole values, nothing wrapped or cut."""
    if _piped(sys.stdout) or not _consoles()[0].is_terminal:
        _plain_table(columns, rows, title)
        return
    from rich.table import Table
    from rich.text import Text

    out = Table(title=Text(shown(title)) if title else None, box=None, header_style="bold", pad_edge=False)
    for i, column in enumerate(columns):
        out.add_column(column, no_wrap=i == 0, overflow="fold")
    for row in rows:
        out.add_row(*(Text("" if v is None else shown(str(v))) for v in row))  # Text: a "[b]" in a name is no markup
    _consoles()[0].print(out)


def _piped(stream: Any) -> bool:
    """Is `stream` surely no terminal, as rich would decide it (no FORCE_COLOR or TTY_COMPATIBLE
    saying otherwise, no tty)? Then a table is printed plain without loading rich at all."""
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return False  # rich's own answer decides


def _plain_table(columns: tuple[str, ...], rows: list[list[Any]], title: str | None) -> None:
    cells = [[shown("" if v is None else str(v)) for v in row] for row in rows]
    header = list(columns) if any(columns) else None
    widths = [max((len(r[i]) for r in ([header] if header else []) + cells), default=0) for i in range(len(columns))]
    lines = [shown(title)] if title else []
    for row in ([header] if header else []) + cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    sys.stdout.write("".join(line.rstrip() + "\n" for line in lines))
    sys.stdout.flush()


def when(value: datetime) -> str:
    """A date in a table: ISO 8601 with its zone (`shown_time`)."""
    return shown_time(value)


def entry_doc(repo: Repository, entry: Entry) -> dict[str, Any]:
    return {
        "path": entry.path,
        "physical_address": repo.physical_address(entry),
        "size": entry.size,
        "checksum": entry.checksum,
        "mtime": epoch_seconds(entry.mtime),
    }


def commit_doc(commit: Commit, *, with_metadata: bool = True) -> dict[str, Any]:
    doc = {
        "id": commit.id,
        "parents": list(commit.parents),
        "message": commit.message,
        "creation_date": epoch_seconds(commit.creation_date),
        "metarange_id": commit.metarange_id,
    }
    if with_metadata:
        doc["metadata"] = commit.metadata
    return doc


def repo_doc(info: RepositoryInfo) -> dict[str, Any]:
    return {
        "id": info.name,
        "storage_namespace": info.storage_namespace,
        "default_branch": info.default_branch,
        "creation_date": epoch_seconds(info.created_at),
    }


def branch_doc(branch: Branch) -> dict[str, Any]:
    return {"id": branch.name, "commit_id": branch.head}


def tag_doc(tag: Tag) -> dict[str, Any]:
    return {"id": tag.name, "commit_id": tag.commit_id}


def change_doc(change: Change) -> dict[str, Any]:
    entry = change.right or change.left
    return {
        "type": str(change.type),
        "path": change.path,
        "path_type": "object",
        "size_bytes": entry.size if entry else None,
    }


# -- runs: GC's and the connectors' --------------------------------------------------------------
def print_run(found: Run, as_json: bool) -> None:
    from lakegc.engine.report import summary_rows, top_tables

    if as_json:
        emit_json(found.to_json())
        return
    what = "GC run" if found.kind == "repository" else f"{found.kind} GC run"
    table("", "", rows=summary_rows(found), title=f"{what} {found.run_id} · {found.target}")
    for title, header, rows in top_tables(found):
        table(*header, rows=rows, title=title)


def print_runs(found: list[Run], as_json: bool) -> None:
    from lakegc.engine.report import window_cell

    if as_json:
        emit_json([r.to_json() for r in found])
        return
    table(
        "RUN",
        "STATE",
        "STARTED",
        "CANDIDATES",
        "DELETED",
        "BYTES",
        "RESTORE WINDOW",
        "NOTE",
        rows=[
            [
                r.run_id,
                r.state,
                when(r.started_at),
                r.num_candidates,
                r.num_deleted,
                r.bytes_deleted,
                window_cell(r),
                r.error or ("dry run" if r.dry_run else r.mode),
            ]
            for r in found
        ],
    )


def print_candidates(rows: Iterator[Candidate], as_json: bool, named: bool = False) -> None:
    """Streamed: the driver never holds them all (a JSON list written element by element). `named`:
    a repository run's, with the path, commit and branch that held each."""
    if as_json:
        sys.stdout.write("[")
        for i, c in enumerate(rows):
            doc = {"address": c.address, "size": c.size, "mtime": epoch_seconds(c.mtime), "reason": c.reason}
            if named:
                doc |= {"path": c.path, "commit": c.commit, "branch": c.branch}
            sys.stdout.write(("," if i else "") + "\n  " + json.dumps(mask_doc(doc)))
        sys.stdout.write("\n]\n")
        return
    if named:
        table(
            "ADDRESS", "SIZE", "MTIME", "REASON", "PATH", "COMMIT", "BRANCH",
            rows=[[c.address, c.size, when(c.mtime), c.reason, c.path or "", (c.commit or "")[:12],
                   c.branch or ""] for c in rows],
        )  # fmt: skip
        return
    table("ADDRESS", "SIZE", "MTIME", "REASON", rows=[[c.address, c.size, when(c.mtime), c.reason] for c in rows])


def show_report(folder, found: Run) -> None:  # type: ignore[no-untyped-def]
    """Print where the run's report.html is (written from the record if the run has none yet: it
    predates reports, or is still under way or was killed before it ended)."""
    from lakegc.engine.recorder import write_report

    if not folder.storage.exists(folder.key("report.html")):
        write_report(folder, found)
    say(folder.storage.full_uri(folder.key("report.html")))
