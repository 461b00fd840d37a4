"""The report's top lists are counted by the tasks that write the candidates (`names.name_tally`) and
ranked on the driver (`top_from_tally`): they must be what grouping every candidate by prefix,
branch and commit would give, however the candidates fall into batches."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakegc.engine.arrowio import sum_tallies
from lakegc.repogc.names import PREFIX_DEPTH, TOP, UNCOMMITTED, name_tally, top_from_tally

SCHEMA = pa.schema(
    [
        ("address", pa.string()),
        ("size", pa.int64()),
        ("path", pa.string()),
        ("commit", pa.string()),
        ("branch", pa.string()),
    ]
)
segments = st.text(alphabet="ab/", min_size=0, max_size=3)
paths = st.one_of(st.none(), st.lists(segments, min_size=1, max_size=5).map("/".join))
rows = st.lists(
    st.tuples(
        paths,
        st.integers(0, 5),
        st.sampled_from(["c1", "c2", "c3"]),
        st.sampled_from(["main", "dev", None]),
    ),
    max_size=40,
)


def prefix_of(path: str | None) -> str:
    """As the report always named them: null path -> uncommitted; a top-level file -> (root);
    else the path's first folders, at most PREFIX_DEPTH, each ending in '/'."""
    if path is None:
        return UNCOMMITTED
    parts = path.split("/")
    depth = len(parts) - 1
    return "(root)" if depth == 0 else "/".join(parts[: min(depth, PREFIX_DEPTH)]) + "/"


def expected(candidates: list[dict]) -> dict:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for c in candidates:
        groups[("prefixes", prefix_of(c["path"]))].append(c)
        groups[("branches", c["branch"] or UNCOMMITTED)].append(c)
        if c["commit"] is not None:
            groups[("commits", c["commit"])].append(c)
    out: dict[str, list] = {"prefixes": [], "branches": [], "commits": []}
    ranked = sorted(groups.items(), key=lambda g: (-sum(c["size"] for c in g[1]), -len(g[1]), g[0][1]))
    for (kind, name), members in ranked:
        if len(out[kind]) < TOP:
            row = {"name": name, "candidates": len(members), "bytes": sum(c["size"] for c in members)}
            if kind == "commits":
                row |= {"branch": next((c["branch"] for c in members if c["branch"]), None), "created": "t"}
            out[kind].append(row)
    return out


@settings(max_examples=200, deadline=None)
@given(rows, st.integers(1, 7))
def test_top_lists_from_the_tally_are_the_grouped_candidates(drawn, batch_size):
    candidates = [
        {"address": f"data/s/{i}", "size": size, "path": path, "commit": None if path is None else commit, "branch": b}
        for i, (path, size, commit, b) in enumerate(drawn)
    ]
    for c in candidates:  # a commit's candidates lapsed on one branch; uncommitted ones have none
        c["branch"] = None if c["commit"] is None else {"c1": "main", "c2": "dev", "c3": None}[c["commit"]]
    table = pa.Table.from_pylist(candidates, schema=SCHEMA)
    tallies = [name_tally(batch) for batch in table.to_batches(max_chunksize=batch_size)]
    summed = sum_tallies(tallies, ["kind", "name", "branch"]) if tallies else None
    assert top_from_tally(summed, dict.fromkeys(["c1", "c2", "c3"], "t")) == expected(candidates)
