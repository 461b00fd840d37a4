"""What a run did, for people: the summary rows the CLI prints, and report.html beside summary.json.

The report is one self-contained HTML file (inline CSS and SVG, no scripts, nothing fetched), so it
opens from a bucket, an artifact store or a mail attachment as it does from a local folder.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from lakegc.gc.ages import BUCKETS_DAYS, bucket_label

if TYPE_CHECKING:
    from lakegc.gc.runs import RunSummary

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:980px;color:#1d2430;padding:0 1rem}
h1{font-size:1.35rem;margin-bottom:.2rem} h2{font-size:1.05rem;margin-top:2rem;border-bottom:1px solid #dde2ea}
table{border-collapse:collapse;margin:.5rem 0} td,th{padding:.25rem .7rem;border-bottom:1px solid #eef1f5;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums} .muted{color:#667085}
.state{display:inline-block;padding:.1rem .55rem;border-radius:.8rem;color:#fff;font-weight:600}
.swept{background:#1a7f37}.failed{background:#cf222e}.marked,.marking,.sweeping{background:#9a6700}
.big{font-size:1.6rem;font-weight:700} svg text{font:12px system-ui,sans-serif;fill:#1d2430}
"""
_REASON_COLOURS = {"expired": "#6f42c1", "uncommitted": "#0969da"}


def summary_rows(s: RunSummary) -> list[list[object]]:
    """The summary as people read it: what ran, what it looked at, what it found, what it deleted."""
    mode = "dry run, " if s.dry_run else ("mark only, " if s.mark_only else "")
    rows: list[list[object]] = [
        ["state", s.state + (f" ({s.error})" if s.error else "")],
        ["mode", f"{mode}{s.mode}" + (f": {s.mode_reason}" if s.mode_reason else "")],
        ["started / finished", f"{s.started_at[:19]} / {(s.finished_at or '-')[:19]}"],
        ["policy", s.policy],
        ["min-age", f"{duration_text(s.min_age_seconds)} (objects modified before {s.cutoff_time[:19]})"],
        ["commits", f"{s.active_commits} active, {s.expired_commits} expired"],
        ["slices", f"{s.num_slices_listed} listed, {s.num_slices_skipped} skipped (settled)"],
        ["objects listed", s.num_listed],
    ]
    if s.mode == "incremental":
        rows.append(["looked up again", f"{s.num_rechecked} (lost a reference since run {s.base_run_id})"])
    by_reason = ", ".join(f"{n} {reason}" for reason, n in sorted(s.candidates_by_reason.items()))
    rows.append(["candidates", f"{s.num_candidates} ({human_bytes(s.bytes_candidates)})" + (f": {by_reason}" if by_reason else "")])
    if s.state in ("swept", "failed") and not (s.dry_run or s.mark_only) or s.num_deleted:
        rows.append(["deleted", f"{s.num_deleted} ({human_bytes(s.bytes_deleted)}), {s.num_failed} failed, "
                                f"{s.num_revived} revived (referenced again since the mark)"])
    if s.phases:
        rows.append(["time", f"{sum(s.phases.values()):.1f}s in phases:"])
        rows += [[f"  {phase}", f"{seconds:.2f}s"] for phase, seconds in s.phases.items()]
    return rows


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


def render_report(s: "RunSummary") -> str:
    """The whole report as one HTML page."""
    reclaimed = (f"{human_bytes(s.bytes_deleted)} reclaimed: {s.num_deleted:,} objects deleted"
                 if s.num_deleted or s.state == "swept" else
                 f"{human_bytes(s.bytes_candidates)} would be reclaimed by {s.num_candidates:,} candidates (nothing deleted yet)")
    parts = [
        *report_top(f"GC run {s.run_id} · {s.repository}", str(s.state), s.started_at, s.finished_at, reclaimed,
                    summary_rows(s), s.phases, s.candidates_by_reason),
        "<h2>Candidates by slice age</h2>", _candidate_ages(s.candidate_ages),
        "<h2>Ages of the listed objects</h2>", age_histogram(s.object_ages, s.min_age_seconds / 86400),
    ]
    return page(f"lakegc run {s.run_id}", parts)


def report_top(title: str, state: str, started_at: str, finished_at: str | None, reclaimed: str,
               summary: list[list[Any]], phases: dict[str, float], by_reason: dict[str, int]) -> list[str]:
    """What every run's report opens with: title, state and times, what was reclaimed, the summary,
    the time per phase and the candidates by reason."""
    return [
        f"<h1>{escape(title)}</h1>",
        f'<p><span class="state {escape(state)}">{escape(state)}</span> '
        f'<span class="muted">{escape(started_at[:19])} → {escape((finished_at or "-")[:19])} UTC</span></p>',
        f'<p class="big">{escape(reclaimed)}</p>',
        "<h2>Summary</h2>", html_table(["", ""], [[str(k), str(v)] for k, v in summary]),
        "<h2>Time per phase</h2>", phases_html(phases),
        "<h2>Candidates by reason</h2>",
        html_table(["reason", "objects"], [[r, f"{n:,}"] for r, n in sorted(by_reason.items())], numeric={1}),
    ]


def page(title: str, parts: list[str]) -> str:
    """One self-contained HTML page of the given parts."""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def html_table(header: list[str], rows: list[list[str]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    if not rows:
        return '<p class="muted">none</p>'

    def cells(tag: str, values: list[str]) -> str:
        return "".join(f'<{tag}{" class=n" if i in numeric else ""}>{escape(v)}</{tag}>' for i, v in enumerate(values))

    head = f"<tr>{cells('th', header)}</tr>" if any(header) else ""
    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table>{head}{body}</table>"


def phases_html(phases: dict[str, float]) -> str:
    total = sum(phases.values()) or 1.0
    rows = [[name, f"{sec:.2f} s", f"{100 * sec / total:.0f} %"] for name, sec in phases.items()]
    return html_table(["phase", "seconds", "share"], rows, numeric={1, 2}) + bars_svg(
        [(name, sec, "#57606a") for name, sec in phases.items()], unit="s")


def _candidate_ages(buckets: list[dict]) -> str:
    rows = [[b["label"], b["reason"], f"{b['count']:,}", human_bytes(b["bytes"])] for b in buckets]
    return html_table(["slice age", "reason", "objects", "bytes"], rows, numeric={2, 3}) + bars_svg(
        [(f"{b['label']} {b['reason']}", b["count"], _REASON_COLOURS.get(b["reason"], "#57606a")) for b in buckets])


_AGES_NOTE = ("Age = time since the object was last modified, for the objects this run listed "
              "(an incremental run lists only the slices it did not skip).")


def age_histogram(buckets: list[dict], min_age_days: float, cutoff: str = "min-age cutoff",
                  note: str = _AGES_NOTE) -> str:
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
        shapes.append(f'<rect x="{x + 4}" y="{height - pad - h:.1f}" width="{bar - 8}" height="{h:.1f}" fill="#0969da">'
                      f"<title>{escape(bucket_label(i))}: {counts.get(i, 0):,}</title></rect>"
                      f'<text x="{x + bar / 2}" y="{height - pad + 16}" text-anchor="middle">{escape(bucket_label(i))}</text>'
                      f'<text x="{x + bar / 2}" y="{height - pad - h - 4:.1f}" text-anchor="middle">{counts.get(i, 0):,}</text>')
    cut = _position(min_age_days) * bar
    shapes.append(f'<line x1="{cut:.1f}" x2="{cut:.1f}" y1="{pad / 2}" y2="{height - pad}" stroke="#cf222e" '
                  f'stroke-width="2" stroke-dasharray="6 4"/><text x="{cut + 6:.1f}" y="{pad / 2 + 10}" fill="#cf222e">'
                  f"{escape(cutoff)} ({duration_text(min_age_days * 86400)}): younger objects are never candidates</text>")
    return (f'<svg role="img" aria-label="object ages" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{"".join(shapes)}</svg>'
            f'<p class="muted">{escape(note)}</p>')


def _position(days: float) -> float:
    """Where `days` falls on the bucket axis: bucket index plus the fraction of the way through it."""
    for i, low in enumerate(BUCKETS_DAYS):
        high = BUCKETS_DAYS[i + 1] if i + 1 < len(BUCKETS_DAYS) else None
        if high is None or days < high:
            return i + (min(1.0, (days - low) / (high - low)) if high else 0.0)
    return float(len(BUCKETS_DAYS))


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
        shapes.append(f'<text x="0" y="{y + 15}">{escape(label)}</text>'
                      f'<rect x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row - 8}" fill="{colour}"/>'
                      f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{shown}</text>')
    return f'<svg width="{width}" height="{row * len(items)}" viewBox="0 0 {width} {row * len(items)}">{"".join(shapes)}</svg>'
