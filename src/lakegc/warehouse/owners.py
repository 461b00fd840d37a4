"""Who answers for each file under a warehouse location: the rule a warehouse run judges by (pure).

The named systems (Iceberg catalogs, Delta tables, lakegc repositories, lakeFS repositories) each
own a folder: a table's location, a repository's namespace. The listing's markers (`connectors.foreign`)
show every folder that holds a table or a namespace, named or not. Together they make the folders
a key is judged by:

- a folder holding a marker that no named system accounts for is *unowned* (a table of a catalog
  nobody named, or a table dropped without purge): kept whole, unless `--unowned delete`;
- a namespace (lakegc or lakeFS) is kept whole: its own GC collects inside it, with the checks only
  it can make (its fences, asking lakeFS again), and its `_lakegc/` or `_lakefs/` is never garbage;
  so is a table that says its files are not its own to delete (Iceberg's `gc.enabled=false`), and a
  folder holding a named table beside a marker of a kind no named system accounts for;
- any other named folder is a *table*: a key inside goes only if that table's own GC would take it
  (Delta: its VACUUM; Iceberg: no snapshot references it and it is not hidden).

A key is kept when any folder holding it is kept whole; otherwise its innermost table judges it,
and a key in no folder at all lies *outside every table*. What every system references, wherever
it lies, is subtracted after (`live`): the rule here never makes a referenced file a candidate,
only an unreferenced one a keeper.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lakegc.connectors.foreign import DELTA, ICEBERG, LAKEFS, LAKEGC

# the kinds of owner a warehouse run knows, as the marker each leaves
KIND_MARKER = {"iceberg": ICEBERG, "delta": DELTA, "repository": LAKEGC, "lakefs": LAKEFS}
NAMESPACES = frozenset({"repository", "lakefs"})

# a key's category in the report
UNOWNED = "unowned table"
OUTSIDE = "outside every table"
INSIDE = "inside a table but unreferenced"
KEPT = "kept"  # in a folder kept whole: never a candidate


@dataclass(frozen=True)
class Owner:
    """One named system's folder under the location (`prefix`, a key prefix ending in `/`), or
    None when it lies elsewhere (it may still reference files here)."""

    kind: str  # iceberg | delta | repository | lakefs
    name: str  # as people name it
    prefix: str | None
    whole: bool = False  # everything in its folder is live (gc.enabled=false)
    partition_fields: frozenset[str] = frozenset()  # Iceberg: its hidden partition folders are not hidden
    location: str = ""  # as its system writes it (references may spell it so)


@dataclass(frozen=True)
class Folder:
    """A folder a key may be judged by (see the module)."""

    prefix: str
    owners: tuple[Owner, ...]  # none: unowned
    markers: tuple[str, ...]  # the marker kinds found in it
    whole: bool  # kept whole whatever the run's options

    @property
    def unowned(self) -> bool:
        return not self.owners

    @property
    def delta(self) -> bool:
        return any(o.kind == "delta" for o in self.owners)

    def hidden(self, rest: str) -> bool:
        """Whether its Iceberg owners' GC keeps `rest` (the key below the folder) as hidden."""
        from lakegc.connectors.iceberg.paths import hidden

        return any(o.kind == "iceberg" and hidden(rest, o.partition_fields) for o in self.owners)


def folders(markers: Iterable[tuple[str, str]], owners: Iterable[Owner]) -> dict[str, Folder]:
    """Every folder a key may be judged by, by prefix: each named folder and each marker folder.
    `markers`: (prefix, kind) of every marker the listing holds below the location."""
    found: dict[str, set[str]] = {}
    for prefix, kind in markers:
        found.setdefault(prefix, set()).add(kind)
    named: dict[str, list[Owner]] = {}
    for owner in owners:
        if owner.prefix is not None:
            named.setdefault(owner.prefix, []).append(owner)
    result = {}
    for prefix in sorted(set(found) | set(named)):
        here = tuple(named.get(prefix, ()))
        kinds = tuple(sorted(found.get(prefix, ())))
        accounted = {KIND_MARKER[o.kind] for o in here}
        namespace = bool({LAKEGC, LAKEFS} & set(kinds)) or any(o.kind in NAMESPACES for o in here)
        whole = namespace or (bool(here) and (any(o.whole for o in here) or not set(kinds) <= accounted))
        result[prefix] = Folder(prefix, here, kinds, whole)
    return result


@dataclass(frozen=True)
class Verdict:
    """How one key is judged: its category, and for a key inside a table, the innermost table's
    folder (`table`) and whether a Delta VACUUM of it must agree (`delta`)."""

    category: str
    table: str | None = None
    delta: bool = False
    top: str = ""  # the top-level folder it is reported under ("" for a file at the location's root)


def judge(key: str, by_prefix: Mapping[str, Folder]) -> Verdict:
    """A key's verdict (see the module): kept, unowned (a candidate only with `--unowned delete`),
    inside a table (if that table's own GC agrees), or outside all. A key in a named table that
    lies in an unowned folder is unowned too (kept with the folder), and with `--unowned delete`
    still only goes if that table's own GC agrees (`table`)."""
    top = key.split("/", 1)[0] + "/" if "/" in key else ""
    holding = [by_prefix[p] for p in ancestors(key) if p in by_prefix]  # innermost first
    if any(f.whole for f in holding) or _metadata(key):
        return Verdict(KEPT, top=top)
    if not holding:
        return Verdict(OUTSIDE, top=top)
    inner = holding[0]
    if inner.unowned:
        return Verdict(UNOWNED, top=top)
    if inner.hidden(key[len(inner.prefix) :]):
        return Verdict(KEPT, top=top)
    category = UNOWNED if any(f.unowned for f in holding) else INSIDE
    return Verdict(category, inner.prefix, inner.delta, top)


def _metadata(key: str) -> bool:
    """A file of lakegc's or lakeFS's own metadata folders, at any depth (a namespace's, or a
    restore window another run keeps under its location): never anyone's garbage."""
    return any(part in ("_lakegc", "_lakefs") for part in key.split("/")[:-1])


def ancestors(key: str) -> list[str]:
    """The folders holding a key, innermost first: `a/b/c` -> [`a/b/`, `a/`]."""
    parts = key.split("/")[:-1]
    return ["/".join(parts[:n]) + "/" for n in range(len(parts), 0, -1)]


def unowned_report(by_prefix: Mapping[str, Folder]) -> list[dict[str, str]]:
    """The unowned folders and the folders kept whole for a marker nobody named, outermost only."""
    shown: list[dict[str, str]] = []
    for prefix, folder in sorted(by_prefix.items()):
        mixed = folder.owners and not set(folder.markers) <= {KIND_MARKER[o.kind] for o in folder.owners}
        if (folder.unowned or mixed) and not any(prefix.startswith(s["folder"]) for s in shown):
            shown.append({"folder": prefix, "markers": ", ".join(folder.markers)})
    return shown
