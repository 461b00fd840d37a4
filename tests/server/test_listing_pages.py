"""lakeFS's listing pages, as pure functions: common prefixes grouped from a sorted listing without
holding it, and pages that read their items only as far as they need."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakegc.server import models


def _grouped_eagerly(paths: list[str], prefix: str, delimiter: str) -> list[tuple[str, str | None]]:
    """The plain definition: every path under `prefix`, cut after the first delimiter past it."""
    found: dict[str, str | None] = {}
    for path in paths:
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            cut = rest.find(delimiter) if delimiter else -1
            if cut >= 0:
                found.setdefault(prefix + rest[: cut + len(delimiter)], None)
            else:
                found[path] = path
    return sorted(found.items())


@given(
    paths=st.sets(st.text(alphabet="ab/-.", min_size=1, max_size=6)),
    prefix=st.text(alphabet="ab/", max_size=2),
    delimiter=st.sampled_from(["", "/", "-"]),
)
def test_lazy_grouping_of_a_sorted_listing_equals_the_plain_definition(
    paths: set[str], prefix: str, delimiter: str
) -> None:
    ordered = sorted(paths)
    assert list(models.grouped(ordered, lambda p: p, prefix, delimiter)) == _grouped_eagerly(ordered, prefix, delimiter)


@pytest.mark.parametrize(
    ("after", "amount", "want", "more", "read"),
    [
        ("", 2, ["a", "b"], True, "abc"),  # the page and one more, to tell there is more
        ("a", 1, ["b"], True, "abc"),
        ("b", 5, ["c", "d"], False, "abcd"),
    ],
)
def test_a_page_reads_only_as_far_as_it_needs(after: str, amount: int, want: list[str], more: bool, read: str) -> None:
    consumed = []

    def items():
        for item in "abcd":
            consumed.append(item)
            yield item

    found, pagination = models.page(items(), lambda x: x, after=after, amount=amount)
    assert (found, pagination.has_more, pagination.next_offset) == (want, more, want[-1] if more else "")
    assert "".join(consumed) == read


def test_a_page_of_an_endless_listing_ends() -> None:
    found, pagination = models.page(itertools.count(), lambda n: f"{n:09d}", amount=3)
    assert found == [0, 1, 2] and pagination.has_more and pagination.next_offset == "000000002"
