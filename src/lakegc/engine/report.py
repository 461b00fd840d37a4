"""What a run did, for people: the summary rows the CLI prints, and report.html beside summary.json.

The report is one self-contained HTML file (inline CSS and SVG, no scripts, nothing fetched), so it
opens from a bucket, an artifact store or a mail attachment as it does from a local folder.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from lakegc.engine.ages import BUCKETS_DAYS, bucket_label
from lakegc.engine.runs import RepositoryDetails
from lakegc.timeutil import shown_time

if TYPE_CHECKING:
    from lakegc.engine.runs import Run

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:980px;color:#1d2430;padding:0 1rem}
h1{font-size:1.35rem;margin-bottom:.2rem} h2{font-size:1.05rem;margin-top:2rem;border-bottom:1px solid #dde2ea}
table{border-collapse:collapse;margin:.5rem 0}
td,th{padding:.25rem .7rem;border-bottom:1px solid #eef1f5;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums} .muted{color:#667085}
.state{display:inline-block;padding:.1rem .55rem;border-radius:.8rem;color:#fff;font-weight:600}
.swept{background:#1a7f37}.failed{background:#cf222e}.marked,.marking,.sweeping{background:#9a6700}
.big{font-size:1.6rem;font-weight:700} svg text{font:12px system-ui,sans-serif;fill:#1d2430}
"""
_REASON_COLOURS = {"expired": "#6f42c1", "uncommitted": "#0969da", "orphan": "#0969da", "prefix mismatch": "#cf222e"}


def _own(run: Run) -> RepositoryDetails:
    """A repository run's own details; for a connector run, none of them (all zero and empty)."""
    return run.details if isinstance(run.details, RepositoryDetails) else _NONE


_NONE = RepositoryDetails()


def _window_text(run: Run) -> str:
    """Where the objects a run moved into its restore window are now: still there, restored or purged."""
    parts = [f"{_own(run).num_in_window} ({human_bytes(_own(run).bytes_in_window)}) in the window"]
    if _own(run).num_restored:
        parts.append(f"{_own(run).num_restored} ({human_bytes(_own(run).bytes_restored)}) restored")
    if _own(run).num_purged:
        parts.append(f"{_own(run).num_purged} ({human_bytes(_own(run).bytes_purged)}) purged")
    if _own(run).purged_at:
        return (
            ", ".join(parts)
            + f"; ended {shown_time(_own(run).quarantine_until)}, purged {shown_time(_own(run).purged_at)}"
        )
    return (
        ", ".join(parts)
        + f"; purge due {shown_time(_own(run).quarantine_until)} (`gc restore` puts them back until then)"
    )


def window_cell(run: Run) -> str:
    """A window run's objects in a few words (`gc runs`); empty for a run without a window."""
    if _own(run).quarantine_until is None or not _own(run).num_moved:
        return ""
    return f"{_own(run).num_moved} moved, {_own(run).num_restored} restored, {_own(run).num_purged} purged"


def _what_ran(run: Run) -> list[list[object]]:
    """The rows that say what ran: a repository run's mode, policy and commits; a connector's
    target and options."""
    times = ["started / finished", f"{shown_time(run.started_at)} / {shown_time(run.finished_at)}"]
    if run.kind != "repository":
        mode = "dry run: nothing deleted, nothing changed" if run.dry_run else "collect"
        return [["target", run.target], ["mode", mode], times, *[[k, v] for k, v in run.settings.items()]]
    own = _own(run)
    mode = "dry run, " if run.dry_run else ("mark only, " if run.mark_only else "")
    min_age = f"{duration_text(run.min_age_seconds)} (objects modified before {shown_time(run.cutoff_time)})"
    return [
        ["mode", f"{mode}{run.mode}" + (f": {own.mode_reason}" if own.mode_reason else "")],
        times,
        ["policy", own.policy],
        ["min-age", min_age],
        ["commits", f"{own.active_commits} active, {own.expired_commits} expired"],
        ["slices", f"{own.num_slices_listed} listed, {own.num_slices_skipped} skipped (settled)"],
    ]


def summary_rows(run: Run) -> list[list[object]]:
    """The run as people read it: what ran, what it looked at, what it found, what it deleted."""
    rows: list[list[object]] = [["state", run.state + (f" ({run.error})" if run.error else "")]]
    rows += _what_ran(run)
    rows.append(["objects listed", listed_text(run)])
    if run.mode == "incremental":
        rows.append(
            ["looked up again", f"{_own(run).num_rechecked} (lost a reference since run {_own(run).base_run_id})"]
        )
    by_reason = ", ".join(f"{n} {reason}" for reason, n in sorted(run.candidates_by_reason.items()))
    rows.append(
        [
            "candidates",
            f"{run.num_candidates} ({human_bytes(run.bytes_candidates)})" + (f": {by_reason}" if by_reason else ""),
        ]
    )
    swept = run.state in ("swept", "failed") and not (run.dry_run or run.mark_only)
    if swept or run.num_deleted or _own(run).num_moved or run.num_failed:
        revived = (
            f", {_own(run).num_revived} revived (referenced again since the mark)" if run.kind == "repository" else ""
        )
        stopped = f", {run.num_stopped} left by --max-deletes" if run.num_stopped else ""
        window = _own(run).quarantine_until is not None
        count, size = (_own(run).num_moved, _own(run).bytes_moved) if window else (run.num_deleted, run.bytes_deleted)
        rows.append(
            [
                "moved to the restore window" if window else "deleted",
                f"{count} ({human_bytes(size)}), {run.num_failed} failed{revived}{stopped}",
            ]
        )
    if run.num_slowdowns:
        rows.append(["store throttling", f"{run.num_slowdowns} delete request(s) throttled; the sweep slowed down"])
    if _own(run).quarantine_until:
        rows.append(["restore window", _window_text(run)])
    rows += [[name, value] for name, value in run.figures.items() if not isinstance(value, (list, dict))]
    if run.phases:
        jobs = f", {run.spark_jobs} Spark job(s)" if run.spark_jobs is not None else ""
        rows.append(["time", f"{sum(run.phases.values()):.1f}s in phases{jobs}:"])
        rows += [[f"  {phase}", f"{seconds:.2f}s{_jobs_of(run, phase)}"] for phase, seconds in run.phases.items()]
    if run.location:
        rows.append(["report", f"{run.location}/report.html"])
    return rows


def _jobs_of(run: Run, phase: str) -> str:
    jobs = run.phase_jobs.get(phase)
    return "" if jobs is None else f", {jobs} Spark job{'' if jobs == 1 else 's'}"


TOP_TITLES = {
    "prefixes": "Top prefixes (path folders) by candidate bytes",
    "branches": "Top branches by candidate bytes",
    "commits": "Commits whose expiry freed the most",
}


def top_tables(run: Run) -> list[tuple[str, list[str], list[list[str]]]]:
    """The run's top lists (what holds its candidates' bytes) as (title, header, rows) tables, for
    the CLI and the report alike; none for a run that did not name its candidates."""
    tables = []
    for name, title in TOP_TITLES.items():
        rows = _own(run).top.get(name) or []
        if not rows:
            continue
        if name == "commits":
            header = ["COMMIT", "BRANCH", "CREATED", "CANDIDATES", "BYTES"]
            body = [
                [r["name"], r.get("branch") or "", shown_time(r.get("created")), f"{r['candidates']:,}",
                 human_bytes(r["bytes"])]
                for r in rows
            ]  # fmt: skip
        else:
            header = [name[:-2].upper() if name == "prefixes" else "BRANCH", "CANDIDATES", "BYTES"]
            body = [[r["name"], f"{r['candidates']:,}", human_bytes(r["bytes"])] for r in rows]
        tables.append((title, header, body))
    if _own(run).retention_curve:
        body = [
            [p["retention"], f"{p['num_candidates']:,}", human_bytes(p["bytes"])] for p in _own(run).retention_curve
        ]
        tables.append(("Retention curve: what a run would collect", ["RETENTION", "CANDIDATES", "BYTES"], body))
    return tables


def listed_text(run: Run) -> str:
    """How many objects a run judged, and how many it kept for being younger than its cutoff."""
    if not run.num_young:
        return f"{run.num_listed}"
    return (
        f"{run.num_listed}, of which {run.num_young} younger than the min-age {duration_text(run.min_age_seconds)}: "
        f"kept, never candidates"
    )


def duration_text(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:g}s"


def human_bytes(n: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.0f} B" if i == 0 else f"{n:.1f} {units[i]}"


def render_report(run: Run) -> str:
    """The whole report as one HTML page."""
    own = _own(run)
    if own.quarantine_until is not None and (own.num_moved or run.state == "swept"):
        reclaimed = (
            f"{human_bytes(own.bytes_purged)} reclaimed: {own.num_purged:,} objects purged from the restore window"
            if own.num_purged
            else f"moved to the restore window: {own.num_moved:,} objects, {human_bytes(own.bytes_moved)}, "
            f"purge due {shown_time(own.quarantine_until)}"
        )
        if own.num_restored:
            reclaimed += f" ({own.num_restored:,} restored)"
    elif run.num_deleted or (run.state == "swept" and not run.dry_run):
        reclaimed = f"{human_bytes(run.bytes_deleted)} reclaimed: {run.num_deleted:,} objects deleted"
    else:
        reclaimed = (
            f"{human_bytes(run.bytes_candidates)} would be reclaimed by {run.num_candidates:,} candidates "
            "(nothing deleted yet)"
        )
    title = (
        f"GC run {run.run_id} · {run.target}"
        if run.kind == "repository"
        else f"{run.kind} GC run {run.run_id} · {run.target}"
    )
    parts = [
        *report_top(
            title,
            str(run.state),
            run.started_at,
            run.finished_at,
            reclaimed,
            summary_rows(run),
            run.phases,
            run.candidates_by_reason,
        ),
    ]
    if run.kind == "repository":  # its candidates by slice age and reason: the reasons' bars are there
        parts += ["<h2>Candidates by slice age</h2>", _candidate_ages(_own(run).candidate_ages)]
        for title, header, rows in top_tables(run):
            parts += [
                f"<h2>{escape(title)}</h2>",
                html_table([h.lower() for h in header], rows, numeric={len(header) - 2, len(header) - 1}),
            ]
        if _own(run).retention_curve:
            parts.append(curve_svg(_own(run).retention_curve))
    else:
        parts.append(
            bars_svg([(r, n, _REASON_COLOURS.get(r, "#0969da")) for r, n in sorted(run.candidates_by_reason.items())])
        )
        parts += detail_tables(run.details)
    parts += ["<h2>Ages of the listed objects</h2>", age_histogram(run.object_ages, run.min_age_seconds / 86400)]
    return page(f"lakegc run {run.run_id}", parts)


def detail_tables(details: Any) -> list[str]:
    """A connector run's details that are lists of records (a warehouse run's folders, an Iceberg
    run's tables), each as a table under its name; a `bytes` column is shown in units."""
    parts: list[str] = []
    for name, value in details.items() if isinstance(details, dict) else ():
        if not (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
            continue
        header = list(value[0])
        rows = [[human_bytes(v.get(h) or 0) if h == "bytes" else _cell(v.get(h)) for h in header] for v in value]
        numeric = {i for i, h in enumerate(header) if all(isinstance(v.get(h), int | float) for v in value)}
        parts += [f"<h2>{escape(str(name).capitalize())}</h2>", html_table(header, rows, numeric=numeric)]
    return parts


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def report_top(
    title: str,
    state: str,
    started_at: str,
    finished_at: str | None,
    reclaimed: str,
    summary: list[list[Any]],
    phases: dict[str, float],
    by_reason: dict[str, int],
) -> list[str]:
    """What every run's report opens with: title, state and times, what was reclaimed, the summary,
    the time per phase and the candidates by reason."""
    return [
        f"<h1>{escape(title)}</h1>",
        f'<p><span class="state {escape(state)}">{escape(state)}</span> '
        f'<span class="muted">{escape(shown_time(started_at))} → {escape(shown_time(finished_at))}</span></p>',
        f'<p class="big">{escape(reclaimed)}</p>',
        "<h2>Summary</h2>",
        html_table(["", ""], [[str(k), str(v)] for k, v in summary]),
        "<h2>Time per phase</h2>",
        phases_html(phases),
        "<h2>Candidates by reason</h2>",
        html_table(["reason", "objects"], [[r, f"{n:,}"] for r, n in sorted(by_reason.items())], numeric={1}),
    ]


def page(title: str, parts: list[str]) -> str:
    """One self-contained HTML page of the given parts."""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n"
    )


def html_table(header: list[str], rows: list[list[str]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    if not rows:
        return '<p class="muted">none</p>'

    def cells(tag: str, values: list[str]) -> str:
        return "".join(f"<{tag}{' class=n' if i in numeric else ''}>{escape(v)}</{tag}>" for i, v in enumerate(values))

    head = f"<tr>{cells('th', header)}</tr>" if any(header) else ""
    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table>{head}{body}</table>"


def phases_html(phases: dict[str, float]) -> str:
    total = sum(phases.values()) or 1.0
    rows = [[name, f"{sec:.2f} s", f"{100 * sec / total:.0f} %"] for name, sec in phases.items()]
    return html_table(["phase", "seconds", "share"], rows, numeric={1, 2}) + bars_svg(
        [(name, sec, "#57606a") for name, sec in phases.items()], unit="s"
    )


def _candidate_ages(buckets: list[dict]) -> str:
    rows = [[b["label"], b["reason"], f"{b['count']:,}", human_bytes(b["bytes"])] for b in buckets]
    return html_table(["slice age", "reason", "objects", "bytes"], rows, numeric={2, 3}) + bars_svg(
        [(f"{b['label']} {b['reason']}", b["count"], _REASON_COLOURS.get(b["reason"], "#57606a")) for b in buckets]
    )


_AGES_NOTE = (
    "Age = time since the object was last modified, for the objects this run listed "
    "(an incremental run lists only the slices it did not skip)."
)


def age_histogram(
    buckets: list[dict], min_age_days: float, cutoff: str = "min-age cutoff", note: str = _AGES_NOTE
) -> str:
    """Objects per age bucket as vertical bars, with the cutoff (`min_age_days`) drawn where it falls."""
    counts = {b["bucket"]: b["count"] for b in buckets}
    if not counts:
        return '<p class="muted">no objects listed</p>'
    n = len(BUCKETS_DAYS)
    width, height, pad, bar = 900, 230, 40, 900 // len(BUCKETS_DAYS)
    top = max(counts.values())
    shapes = []
    for i in range(n):
        h = (height - 2 * pad) * counts.get(i, 0) / top
        x = i * bar
        shapes.append(
            f'<rect x="{x + 4}" y="{height - pad - h:.1f}" width="{bar - 8}" height="{h:.1f}" fill="#0969da">'
            f"<title>{escape(bucket_label(i))}: {counts.get(i, 0):,}</title></rect>"
            f'<text x="{x + bar / 2}" y="{height - pad + 16}" text-anchor="middle">{escape(bucket_label(i))}</text>'
            f'<text x="{x + bar / 2}" y="{height - pad - h - 4:.1f}" text-anchor="middle">{counts.get(i, 0):,}</text>'
        )
    cut = _position(min_age_days) * bar
    shapes.append(
        f'<line x1="{cut:.1f}" x2="{cut:.1f}" y1="{pad / 2}" y2="{height - pad}" stroke="#cf222e" '
        f'stroke-width="2" stroke-dasharray="6 4"/><text x="{cut + 6:.1f}" y="{pad / 2 + 10}" fill="#cf222e">'
        f"{escape(cutoff)} ({duration_text(min_age_days * 86400)}): younger objects are never candidates</text>"
    )
    return (
        f'<svg role="img" aria-label="object ages" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(shapes)}</svg>'
        f'<p class="muted">{escape(note)}</p>'
    )


def _position(days: float) -> float:
    """Where `days` falls on the bucket axis: bucket index plus the fraction of the way through it."""
    for i, low in enumerate(BUCKETS_DAYS):
        high = BUCKETS_DAYS[i + 1] if i + 1 < len(BUCKETS_DAYS) else None
        if high is None or days < high:
            return i + (min(1.0, (days - low) / (high - low)) if high else 0.0)
    return float(len(BUCKETS_DAYS))


def curve_svg(points: list[dict[str, Any]], width: int = 640, height: int = 220) -> str:
    """Bytes a run would free against retention (days): a line through the points, labelled."""
    ordered = sorted(points, key=lambda p: p["seconds"])
    left, right, top, bottom = 70, 20, 20, 40
    span_x = max((p["seconds"] for p in ordered), default=1) or 1
    span_y = max((p["bytes"] for p in ordered), default=1) or 1

    def xy(p: dict[str, Any]) -> tuple[float, float]:
        x = left + (width - left - right) * p["seconds"] / span_x
        return x, top + (height - top - bottom) * (1 - p["bytes"] / span_y)

    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(xy, ordered))
    shapes = [
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#8c959f"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#8c959f"/>',
        f'<polyline points="{line}" fill="none" stroke="#0969da" stroke-width="2"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{escape(human_bytes(span_y))}</text>',
        f'<text x="{(width + left) / 2}" y="{height - 8}" text-anchor="middle">retention</text>',
    ]
    for p in ordered:
        x, y = xy(p)
        shapes += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#0969da"/>',
            f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle">{escape(str(p["retention"]))}</text>',
        ]
    return (
        f'<svg role="img" aria-label="retention curve" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(shapes)}</svg>'
    )


def bars_svg(items: list[tuple[str, float, str]], unit: str = "") -> str:
    """Horizontal bars, one per item (label, value, colour)."""
    if not items:
        return ""
    top = max(v for _, v, _ in items) or 1
    row, label_w, width = 22, 300, 900
    shapes = []
    for i, (label, value, colour) in enumerate(items):
        w = (width - label_w - 90) * value / top
        y = i * row
        shown = f"{value:,.2f} {unit}" if unit else f"{value:,.0f}"
        shapes.append(
            f'<text x="0" y="{y + 15}">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row - 8}" fill="{colour}"/>'
            f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{shown}</text>'
        )
    height = row * len(items)
    return f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}">{"".join(shapes)}</svg>'
