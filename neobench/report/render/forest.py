"""`neobench table --plot`: the table as a forest plot, one panel per column, rows in the table's
order (the marks: STYLES). `panels` computes what is drawn (pure, tested); `draw` only lays it
out with matplotlib."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from neobench.core.errors import NeobenchError
from neobench.report.columns import AVG, DOWN, MARK_WORDS, SHORT, UP
from neobench.report.table import LeaderTable, Row

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_TASK_PANELS = 24  # beyond this (--per-task), the figure is not readable at a glance


@dataclass(frozen=True)
class Style:
    marker: str
    color: str
    legend: str
    hollow: bool = False


STYLES = {
    "computed": Style("o", "#2c5d9e", "computed row"),
    "baseline": Style("s", "#111111", "baseline row (dashed line: its score)"),
    "above": Style("^", "#1b7837", f"{UP} significantly above the baseline"),
    "below": Style("v", "#c0392b", f"{DOWN} significantly below the baseline"),
    "paper": Style("D", "#8c8c8c", "paper row (quoted, no interval)", hollow=True),
}


@dataclass(frozen=True)
class Point:
    value: float  # x100
    low: float | None  # the 95% interval x100; None without --ci and for paper rows
    high: float | None
    style: str  # a key of STYLES
    partial: str = ""  # "k/n" when the cell averages fewer tasks than its column has


@dataclass
class Panel:
    title: str
    column: str  # its key in Row.ci / Row.marks
    points: dict[int, Point] = field(default_factory=dict)  # table row index -> its point
    baseline: float | None = None  # the baseline row's score: the reference line

    def limits(self) -> tuple[float, float] | None:
        """An x range around every point and interval, with room for the "k/n" labels."""
        ends = [x for p in self.points.values() for x in (p.value, p.low, p.high) if x is not None]
        if self.baseline is not None:
            ends.append(self.baseline)
        if not ends:
            return None
        low, high = min(ends), max(ends)
        pad = max(0.08 * (high - low), 0.6)
        room = 2.5 * pad if any(p.partial for p in self.points.values()) else pad
        return low - pad, high + room


def panels(table: LeaderTable) -> list[Panel]:
    """What the plot draws: per column, a point per row that has a score there."""
    base = next((i for i, r in enumerate(table.rows) if r.label == table.baseline), None)
    out = []
    for column, title in _columns(table):
        panel = Panel(title, column)
        for i, row in enumerate(table.rows):
            value, partial = _cell(table, row, column)
            if value is None:
                continue  # no point, never a zero
            low_high = None if row.quoted else row.ci.get(column)
            low, high = low_high if low_high else (None, None)
            mark = MARK_WORDS.get(row.marks.get(column, ""), "computed")
            style = "paper" if row.quoted else "baseline" if i == base else mark
            panel.points[i] = Point(value, low, high, style, partial)
        if base is not None and base in panel.points:
            panel.baseline = panel.points[base].value
        out.append(panel)
    return out


def _columns(table: LeaderTable) -> list[tuple[str, str]]:
    avg = (AVG, f"Avg. ({_tasks(table.benchmark_tasks)})")
    if not table.per_task:
        return [(t, f"{SHORT.get(t, t)} ({_tasks(n)})") for t, n in table.types] + [avg]
    held = [t for t in table.task_names if any(t in row.tasks for row in table.rows)]
    if len(held) > MAX_TASK_PANELS:
        raise NeobenchError(
            f"--plot with --per-task: the rows hold scores on {len(held)} tasks, and a plot "
            f"shows at most {MAX_TASK_PANELS} task panels legibly. Leave out --per-task to "
            "plot one panel per task type (the table itself can stay per task: run it twice), "
            "or narrow the rows with --models."
        )
    return [(t, t) for t in held] + [avg]


def _tasks(n: int) -> str:
    return f"{n} task" + ("s" if n != 1 else "")


def _cell(table: LeaderTable, row: Row, column: str) -> tuple[float | None, str]:
    """A row's score in a column, and "k/n" when it averages k of the column's n tasks."""
    if column == AVG:
        k, n = row.avg_of
        return row.avg, f"{k}/{n}" if k < n else ""
    if table.per_task:
        return row.tasks.get(column), ""
    cell = row.types.get(column)
    if cell is None or cell.value is None:
        return None, ""
    return cell.value, f"{cell.present}/{cell.total}" if cell.present < cell.total else ""


_FONT, _NOTE_FONT = 7, 6  # points


@dataclass
class _Rows:
    """The y-axis every panel shares: each row's wrapped label and its position (a wrapped label
    gets more height, so labels never overlap)."""

    labels: list[str]
    ys: list[float]
    span: tuple[float, float]  # ylim, top row first
    rule: float | None  # y of the line between computed and paper rows

    @classmethod
    def of(cls, table: LeaderTable) -> _Rows:
        labels = [textwrap.fill(row.name, 40) for row in table.rows]
        heights = [1 + 0.75 * label.count("\n") for label in labels]
        ys, y = [], 0.0
        for i, h in enumerate(heights):
            y += (heights[i - 1] + h) / 2 if i else 0.0
            ys.append(y)
        first_quoted = next((i for i, r in enumerate(table.rows) if r.quoted), 0)
        rule = ys[first_quoted] - heights[first_quoted] / 2 if first_quoted else None
        bottom = ys[-1] + heights[-1] / 2 if ys else 0.5
        return cls(labels, ys, (bottom, -heights[0] / 2 if ys else -0.5), rule)


def draw(table: LeaderTable, path: Path) -> None:
    """Write the forest plot of ``table`` as a PNG (one figure, Agg, no state)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found, rows = panels(table), _Rows.of(table)
    ncols = min(len(found), 4 if len(found) <= 16 else 5)
    nrows = -(-len(found) // ncols)
    width = 2.6 + ncols * 2.9  # inches, as every size here
    notes = _footnote(table, width)
    head, foot = 0.75, 0.15 + len(notes) * _NOTE_FONT * 1.4 / 72
    height = head + nrows * (0.75 + 0.22 * max(rows.span[0] - rows.span[1], 3)) + foot
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(found):
            ax.set_axis_off()
            continue
        _draw_panel(ax, found[k], rows, rows.labels if k % ncols == 0 else [])
        if k + ncols >= len(found):
            ax.set_xlabel("score x100", fontsize=_FONT)
    # Laid out first, so the title, legend and footnote sit in the margins kept for them.
    fig.tight_layout(rect=(0, foot / height, 1, 1 - head / height), w_pad=0.6, h_pad=1.0)
    fig.suptitle(table.benchmark, fontsize=11, fontweight="bold", y=1 - 0.08 / height)
    _legend(fig, found, table, 1 - 0.45 / height)
    fig.text(0.01, 0.1 / height, "\n".join(notes), fontsize=_NOTE_FONT, va="bottom", color="0.25")
    fig.savefig(path, dpi=150, metadata={"Software": None})  # no version stamp: same bytes
    plt.close(fig)


def _draw_panel(ax: Axes, panel: Panel, rows: _Rows, labels: list[str]) -> None:
    """One panel: points, then title, ticks, grid, x range; row labels only where ``labels``."""
    from matplotlib.ticker import MaxNLocator

    ax.set_ylim(*rows.span)
    ax.set_yticks(rows.ys)
    if rows.rule is not None:  # between the computed rows and the paper's
        ax.axhline(rows.rule, color="0.75", linewidth=0.6, zorder=1)
    if panel.baseline is not None:
        ax.axvline(panel.baseline, color="0.3", linewidth=0.8, linestyle="--", zorder=1)
    for i, point in panel.points.items():
        style, y = STYLES[point.style], rows.ys[i]
        if point.low is not None and point.high is not None:
            ax.hlines(y, point.low, point.high, color=style.color, linewidth=1.3, zorder=2)
        hollow = style.hollow or bool(point.partial)
        ax.plot(
            point.value,
            y,
            marker=style.marker,
            markersize=5.5,
            markeredgecolor=style.color,
            markerfacecolor="white" if hollow else style.color,
            markeredgewidth=1.1,
            linestyle="none",
            zorder=3,
        )
        if point.partial:
            end = point.high if point.high is not None else point.value
            ax.annotate(
                point.partial,
                (end, y),
                xytext=(5, 0),
                textcoords="offset points",
                fontsize=_NOTE_FONT,
                va="center",
                color=style.color,
            )
    ax.set_yticklabels(labels, fontsize=_FONT)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=_FONT)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    ax.grid(axis="y", color="0.92", linewidth=0.8, zorder=0)
    ax.set_title(panel.title, fontsize=8)
    limits = panel.limits()
    if limits is None:
        ax.set_xticks([])
        ax.text(0.5, 0.5, "no scores", transform=ax.transAxes, ha="center", fontsize=_FONT)
    else:
        ax.set_xlim(*limits)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _legend(fig: Figure, found: list[Panel], table: LeaderTable, y: float) -> None:
    """One legend: the styles that occur, and what hollow and lines mean."""
    from matplotlib.lines import Line2D

    used = {p.style for panel in found for p in panel.points.values()}
    intervals = any(p.low is not None for panel in found for p in panel.points.values())
    handles = []
    for key, style in STYLES.items():
        if key not in used:
            continue
        text = style.legend
        if key == "computed" and table.baseline:
            text = "not significantly different from the baseline"
        with_line = intervals and key != "paper"
        face = "white" if style.hollow else style.color
        handles.append(
            Line2D([], [], color=style.color, marker=style.marker, markerfacecolor=face,
                   linestyle="-" if with_line else "none", linewidth=1.3, label=text)
        )  # fmt: skip
    if intervals:
        handles.append(Line2D([], [], color="0.3", linewidth=1.3, label="line: 95% interval"))
    if any(p.partial for panel in found for p in panel.points.values()):
        handles.append(
            Line2D([], [], color="0.3", marker="o", markerfacecolor="white", linestyle="none",
                   label="hollow + k/n: partial, k of the n tasks")
        )  # fmt: skip
    fig.legend(
        handles=handles, loc="center", bbox_to_anchor=(0.5, y), ncol=min(len(handles), 4),
        fontsize=_FONT, frameon=False, handletextpad=0.4, columnspacing=1.6,
    )  # fmt: skip


_PLUS_MINUS = "± = half the width of the "


def _footnote(table: LeaderTable, width_in: float) -> list[str]:
    """The table's legend notes for lines and marks, then where rows came from."""
    notes = []
    for note in table.notes:
        if note.startswith(_PLUS_MINUS):  # the table's ± is half the interval the plot draws
            notes.append("Lines = the " + note[len(_PLUS_MINUS) :])
        elif note.startswith("±"):
            notes.append("Lines = the interval whose half width the table shows after ±. " + note)
        elif note.startswith(UP):
            notes.append(note)
    notes += [n for n in table.notes if n.startswith(("Rows marked (paper)", "Avg. = "))]
    notes.append("No point: no score in that cell.")
    chars = int(width_in * 72 / (0.58 * _NOTE_FONT))
    lines = [line for note in notes for line in textwrap.wrap(note, chars)]
    groups: dict[str, list[str]] = {}  # one line per distinct source (the paper's rows share one)
    for row in table.rows:
        groups.setdefault(row.source, []).append(row.label)
    lines.append("Sources:")
    for source, names in groups.items():
        more = f" and {len(names) - 1} more rows" if len(names) > 1 else ""
        lines.append(_cut(f"{names[0]}{more}: {source}", chars))
    return lines


def _cut(text: str, chars: int) -> str:
    """``text`` in at most ``chars`` characters, its middle elided (a path's ends say most)."""
    if len(text) <= chars:
        return text
    keep = chars - 1
    return text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :]
