"""Path rules' globs, gitignore-style, as regular expressions both Python and Arrow (RE2) run.

- `*` matches within one path segment, `?` one character of a segment, `[abc]`/`[!a-z]` one of a
  set (never `/`);
- `**` matches across segments: `logs/**` everything under `logs/`, `**/tmp` a `tmp` at any depth,
  `a/**/b` `b` under `a/` at any depth (also directly);
- a glob with no `/` (a trailing one aside) matches a name at any depth (`*.log` matches
  `x/y.log`); one with a `/` at its start or in its middle is anchored at the root;
- a glob that matches a folder matches everything in it (`logs` and `logs/` match `logs/a/b`).

Negation (`!glob`) is refused: path rules are first-match, not gitignore's last-match-with-undo.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from lakegc.errors import InvalidArgument

if TYPE_CHECKING:
    import pyarrow as pa


def glob_regex(glob: str) -> str:
    """The body of a regex (no anchors, `.` matching newlines) that matches exactly the paths the
    glob matches; InvalidArgument for a glob that is not one."""
    if not glob or glob.strip("/") == "":
        raise InvalidArgument(f"invalid glob {glob!r}: it matches no path")
    if glob.startswith("!"):
        raise InvalidArgument(f"invalid glob {glob!r}: negation is not supported (path rules are first-match)")
    body = glob.rstrip("/")
    anchored = "/" in body
    body = body.lstrip("/")
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if body.startswith("**", i):
            before_ok = i == 0 or body[i - 1] == "/"
            after = body[i + 2 : i + 3]
            if not before_ok or after not in ("", "/"):
                raise InvalidArgument(f"invalid glob {glob!r}: ** must be a whole path segment")
            if after == "/":
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*")
                i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = body.find("]", i + 2)
            if end < 0:
                raise InvalidArgument(f"invalid glob {glob!r}: [ without ]")
            members = body[i + 1 : end]
            negated = members.startswith("!")
            members = members[1:] if negated else members
            if not members or "/" in members:
                raise InvalidArgument(f"invalid glob {glob!r}: a [set] must name characters other than /")
            escaped = members.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
            out.append(f"[^/{escaped}]" if negated else f"[{escaped}]")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    core = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    return f"{prefix}{core}(?:/.*)?"


class PathClasses:
    """Which rule each path falls under: 0 when no glob matches, else the 1-based index of the
    first glob that does."""

    def __init__(self, globs: Sequence[str]):
        self.globs = list(globs)
        self._bodies = [glob_regex(g) for g in self.globs]
        self._compiled = [re.compile(b, re.S) for b in self._bodies]

    def __len__(self) -> int:
        return len(self.globs)

    def of(self, path: str) -> int:
        for index, regex in enumerate(self._compiled, 1):
            if regex.fullmatch(path):
                return index
        return 0

    @cached_property
    def _arrow_patterns(self) -> list[str]:
        return [f"^(?s:{body})$" for body in self._bodies]

    def of_array(self, paths: pa.Array | pa.ChunkedArray) -> pa.Array:
        """`of` for each path, in Arrow (RE2) on the executors: int8, 0 where nothing matches."""
        import pyarrow as pa  # here: the rules are read by every command, Arrow is needed by few
        import pyarrow.compute as pc

        classes = pa.array([0] * len(paths), pa.int8())
        for index in range(len(self.globs), 0, -1):  # the first match wins: apply the last first
            matched = pc.fill_null(pc.match_substring_regex(paths, self._arrow_patterns[index - 1]), False)
            classes = pc.if_else(matched, pa.scalar(index, pa.int8()), classes)
        return classes.combine_chunks() if isinstance(classes, pa.ChunkedArray) else classes
