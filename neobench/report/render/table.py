"""Render a leaderboard table: Markdown, CSV, LaTeX, a rich table for the terminal, a PNG.

The numbers are decided in neobench/report/table.py; this module only lays them out.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from neobench.core.conditions import FIELDS as CONDITION_FIELDS
from neobench.core.errors import NeobenchError, check_choice, collect, writable_folder_problems
from neobench.report.columns import AVG, DOWN, UP
from neobench.report.table import LeaderTable, Row

# Terminal layout (print_rich): a model name narrower than this wraps onto more lines; headers
# wrap at spaces, a word longer than the cap (a model name over a per-task column) folds.
_MODEL_MIN = 20
_HEADER_CAP = 16
_KEY_FLOOR = 8
_GAP = 3  # padding either side of a column plus the space between columns


def to_markdown(table: LeaderTable) -> str:
    header = table.header()
    lines = [
        f"**{table.benchmark}**",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(table.cells(row)) + " |" for row in table.rows]
    lines += [
        "",
        *(f"- {note}" for note in table.notes),
        "",
        "Sources:",
        *(f"- {s}" for s in table.sources),
    ]
    return "\n".join(lines) + "\n"


def to_csv(table: LeaderTable) -> str:
    """One row per table row, plain numbers only. With --ci each score column is followed by
    ``<column>_ci_low`` and ``<column>_ci_high`` (and ``<column>_mark`` = above / below with
    --baseline), so the file stays machine-readable instead of carrying "±" text."""
    buffer = io.StringIO()
    for line in ["neobench table: " + table.benchmark, *table.notes, "Sources:", *table.sources]:
        buffer.write(f"# {line}\n")
    writer = csv.writer(buffer)
    extra = _CsvExtra(_has_intervals(table), table.baseline is not None)
    writer.writerow(_csv_header(table, extra))
    for row in table.rows:
        writer.writerow(_csv_row(table, row, extra))
    return buffer.getvalue()


def _csv_header(table: LeaderTable, extra: _CsvExtra) -> list[str]:
    if table.per_task:
        scores = [h for t in table.task_names for h in extra.header(t)]
        return ["model", *scores, *extra.header("avg"), "missing_tasks", "quoted"]
    types = [t for t, _ in table.types]
    return [
        "model",
        *(h for t in types for h in extra.header(t)),
        *(f"{t}_tasks" for t in types),
        *extra.header("avg"),
        "avg_tasks",
        "mean_task_type",
        "missing_tasks",
        "quoted",
        "finetuned",
        "zero_shot",
        "in_domain",
        *CONDITION_FIELDS,
    ]


def _csv_row(table: LeaderTable, row: Row, extra: _CsvExtra) -> list[object]:
    avg = extra.cells(row, AVG, row.avg)
    if table.per_task:
        scores = [c for t in table.task_names for c in extra.cells(row, t, row.tasks.get(t))]
        return [row.label, *scores, *avg, len(row.missing), row.quoted]
    types = [t for t, _ in table.types]
    return [
        row.label,
        *(c for t in types for c in extra.cells(row, t, row.types[t].value)),
        *(f"{row.types[t].present}/{row.types[t].total}" for t in types),
        *avg,
        "{}/{}".format(*row.avg_of),
        _num(row.mean_types),
        len(row.missing),
        row.quoted,
        row.finetuned,
        row.zero_shot_text(),
        " ".join(sorted(c for c in row.in_domain if c in row.tasks)),
        *(row.conditions.get(k, "") for k in CONDITION_FIELDS),
    ]


@dataclass(frozen=True)
class _CsvExtra:
    """The columns that follow each score column in the CSV: its interval, its mark."""

    ci: bool
    marks: bool

    def header(self, name: str) -> list[str]:
        return [
            name,
            *((f"{name}_ci_low", f"{name}_ci_high") if self.ci else ()),
            *((f"{name}_mark",) if self.marks else ()),
        ]

    def cells(self, row: Row, column: str, value: float | None) -> list[str]:
        # An empty score (a missing task, Avg. of an incomplete row) has no interval or mark.
        low_high = row.ci.get(column) if value is not None else None
        mark = row.marks.get(column, "") if value is not None else ""
        return [
            _num(value),
            *((_num(low_high[0]), _num(low_high[1])) if self.ci and low_high else ()),
            *(("", "") if self.ci and not low_high else ()),
            *((_MARK_WORDS.get(mark, ""),) if self.marks else ()),
        ]


_MARK_WORDS = {UP: "above", DOWN: "below"}


def _has_intervals(table: LeaderTable) -> bool:
    """Whether the table was built with --ci: its legend note says what ± is."""
    return any(row.ci for row in table.rows) or any(n.startswith("±") for n in table.notes)


def to_latex(table: LeaderTable) -> str:
    header = [_tex(h) for h in table.header()]
    lines = [
        f"% neobench table: {table.benchmark}",
        *(f"% source: {s}" for s in table.sources),
        "% requires \\usepackage{booktabs} (and amssymb for the ▲ / ▼ marks of --baseline)",
        "\\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        "\\toprule",
        " & ".join(header) + " \\\\",
        "\\midrule",
    ]
    quoted_started = False
    for row in table.rows:
        if row.quoted and not quoted_started:
            lines.append("\\midrule")
            quoted_started = True
        lines.append(" & ".join(_tex(c) for c in table.cells(row)) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    lines += [f"% note: {n}" for n in table.notes]
    # What ± and ▲ / ▼ mean is part of the table, so it is typeset under it, not only commented.
    legend = [n for n in table.notes if n.startswith(("±", UP))]
    if legend:
        lines += ["\\par\\smallskip", "{\\footnotesize", *(_tex(n) + "\\par" for n in legend), "}"]
    return "\n".join(lines) + "\n"


def print_rich(table: LeaderTable, console: Console) -> None:
    """Print the table on a rich console, whole: never an ellipsis in a name or a number.

    Piped or redirected (not ``console.is_terminal``): one row per model on one line each, as
    wide as the widest row needs, so a log holds every name and score whole and greppable.

    In a terminal the output fits ``console.width``. Scores keep their column width; headers
    wrap at spaces; long model names wrap inside their column instead of being cut. When the
    columns do not fit side by side, they are split into several stacked tables, each
    repeating the name column. ``--per-task`` is transposed first (one row per task, one
    column per model), since 56 task columns fit no terminal but 56 rows scroll fine; task
    names are never folded. Notes follow the table, wrapped at spaces in a terminal and one
    line each when piped.
    """
    if not console.is_terminal:
        grid = _grid(table)
        widths = grid.natural_widths()
        everything = list(range(len(grid.headers)))
        wide = Console(
            file=console.file,
            width=_table_width(widths, everything),
            color_system=console.color_system,  # type: ignore[arg-type]
            force_terminal=False,
            legacy_windows=False,
        )
        wide.print(_rich_part(grid, widths, everything, table.benchmark))
        for note in table.notes:
            console.print(note, soft_wrap=True, markup=False, highlight=False)
        return
    grid = _transposed(table) if table.per_task else _grid(table)
    for i, (widths, columns) in enumerate(_fit(grid, console.width)):
        if i:
            console.print()
        console.print(_rich_part(grid, widths, columns, table.benchmark if i == 0 else None))
    console.print()
    for note in table.notes:
        console.print(note, markup=False, highlight=False, overflow="fold")


@dataclass
class _Grid:
    """A table as text before layout: a name column (``keys``) and value columns."""

    key_header: str
    keys: list[str]
    key_min: int  # narrowest the name column may be before its names wrap
    headers: list[str]
    cells: list[list[str]]  # cells[row][column]
    dim_rows: set[int] = field(default_factory=set)
    dim_columns: set[int] = field(default_factory=set)
    rule_after: int | None = None  # a line under this row (per task: before Avg. and Missing)

    def natural_widths(self) -> list[int]:
        """Key width first, then each value column: everything on one line."""
        key = max(map(cell_len, [self.key_header, *self.keys]))
        return [key, *(_longest(h, c, words=False) for h, c in self._columns())]

    def compact_widths(self) -> list[int]:
        """Value columns as narrow as they get with every cell on one line and headers wrapped."""
        return [_longest(h, c, words=True) for h, c in self._columns()]

    def _columns(self) -> list[tuple[str, list[str]]]:
        return [(h, [row[i] for row in self.cells]) for i, h in enumerate(self.headers)]


def _longest(header: str, cells: list[str], *, words: bool) -> int:
    """Widest cell; the header counts whole, or (words) by its longest word up to _HEADER_CAP."""
    head = max(map(cell_len, header.split())) if words else cell_len(header)
    return max([min(head, _HEADER_CAP) if words else head, *map(cell_len, cells)])


def _grid(table: LeaderTable) -> _Grid:
    """One row per table row, as in the Markdown and CSV outputs."""
    rows = [table.cells(row) for row in table.rows]
    return _Grid(
        key_header=table.header()[0],
        keys=[r[0] for r in rows],
        key_min=_MODEL_MIN,
        headers=table.header()[1:],
        cells=[r[1:] for r in rows],
        dim_rows={i for i, row in enumerate(table.rows) if row.quoted},
    )


def _transposed(table: LeaderTable) -> _Grid:
    """Per task: one row per task (then Avg. and Missing), one column per table row."""
    columns = [table.cells(row)[1:] for row in table.rows]
    keys = table.header()[1:]
    return _Grid(
        key_header="Task",
        keys=keys,
        key_min=max(map(cell_len, keys)),  # task names stay whole
        headers=[row.name for row in table.rows],
        cells=[[column[i] for column in columns] for i in range(len(keys))],
        dim_columns={i for i, row in enumerate(table.rows) if row.quoted},
        rule_after=len(table.task_names) - 1,
    )


def _fit(grid: _Grid, width: int) -> list[tuple[list[int], list[int]]]:
    """Greedily group the value columns into stacked parts that each fit ``width``.

    Returns, per part, the widths (name column first, then every value column) and the value
    columns it shows. The name column takes what its part leaves, up to its natural width.
    """
    compact = grid.compact_widths()
    key_natural = grid.natural_widths()[0]
    key_min = min(grid.key_min, key_natural)
    groups: list[list[int]] = []
    for column in range(len(compact)):
        if groups and _table_width([key_min, *compact], [*groups[-1], column]) <= width:
            groups[-1].append(column)
        else:
            groups.append([column])
    parts = []
    for group in groups:
        spare = width - _table_width([0, *compact], group)
        # A terminal narrower than one column plus the names: fold the names rather than fail.
        key = max(_KEY_FLOOR, min(key_natural, spare))
        parts.append(([key, *compact], group))
    return parts or [([min(key_natural, width)], [])]  # no value columns: the names alone


def _table_width(widths: list[int], columns: list[int]) -> int:
    """Printed width of _rich_part: the name column, the chosen columns, 3 between each."""
    return widths[0] + sum(widths[c + 1] + _GAP for c in columns)


def _rich_part(grid: _Grid, widths: list[int], columns: list[int], title: str | None) -> Table:
    """A rich Table of the name column and ``columns``, every width fixed (nothing measured).

    Every string goes in as Text, not markup: a label such as "org/m [max_seq_length_256]"
    would otherwise lose its brackets (rich reads them as a style tag)."""
    out = Table(
        title=Text(title) if title else None,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title_justify="left",
    )
    out.add_column(Text(grid.key_header), width=widths[0], overflow="fold")
    for c in columns:
        dim = "dim" if c in grid.dim_columns else None
        out.add_column(
            Text(grid.headers[c]),
            width=widths[c + 1],
            justify="right",
            overflow="fold",
            style=dim,
            header_style=dim or "bold",
        )
    for r, key in enumerate(grid.keys):
        out.add_row(
            Text(key),
            *(Text(grid.cells[r][c]) for c in columns),
            style="dim" if r in grid.dim_rows else None,
            end_section=r == grid.rule_after,
        )
    return out


def plot(table: LeaderTable, path: Path) -> None:
    """The PNG: a forest plot, one panel per column (neobench/report/render/forest.py)."""
    from neobench.report.render import forest

    forest.draw(table, path)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _tex(text: str) -> str:
    """``text`` as LaTeX: special characters escaped, ± and the marks as math symbols."""
    return "".join(_TEX.get(c, c) for c in text)


_TEX = {
    "\\": "\\textbackslash{}",
    "&": "\\&",
    "%": "\\%",
    "$": "\\$",
    "#": "\\#",
    "_": "\\_",
    "{": "\\{",
    "}": "\\}",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
    "—": "--",
    "…": "\\ldots{}",
    "±": "$\\pm$",
    UP: "$\\blacktriangle$",
    DOWN: "$\\blacktriangledown$",
}


# The file formats of a table: name -> (file suffix, writer). A new format is its writer above
# and one line here: --format, the --out suffix and the messages all read this.
FORMATS = {"md": (".md", to_markdown), "csv": (".csv", to_csv), "latex": (".tex", to_latex)}
RICH = "rich"  # the terminal: printed, never written to a file


def write(table: LeaderTable, fmt: str) -> str:
    """The table as the text of one file format."""
    return FORMATS[fmt][1](table)


def output_format(fmt: str | None, out: str | None, plot: str | None) -> str:
    """The format `neobench table` writes: --format, else the --out suffix, else rich; refuses a
    rich --out, a --plot that is not PNG and an --out/--plot folder that cannot be written,
    all at once."""
    problems: list[str] = []
    if fmt is not None:
        collect(problems, check_choice, "--format", fmt, [RICH, *FORMATS])
    suffixes = {suffix: name for name, (suffix, _) in FORMATS.items()}
    chosen = fmt or (suffixes.get(Path(out).suffix) if out else None) or RICH
    if out and chosen == RICH:
        names, files = list(FORMATS), "/".join(s for s, _ in FORMATS.values())
        problems.append(
            f"--out {out}: choose --format {', '.join(names[:-1])} or {names[-1]} "
            f"(or a {files} name)."
        )
    if plot and Path(plot).suffix.lower() != ".png":
        problems.append(f"--plot {plot}: the chart is written as PNG; name it *.png.")
    for flag, target in (("--out", out), ("--plot", plot)):
        if target:
            problems += writable_folder_problems(
                Path(target).parent, f"{flag} {target}: its folder", "Write it somewhere else."
            )
    if problems:
        raise NeobenchError(problems)
    return chosen
