"""Render a leaderboard table: Markdown, CSV, LaTeX, the terminal (render/terminal.py), a PNG.

The numbers are decided in neobench/report/table.py; this module only lays them out.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from neobench.core.conditions import FIELDS as CONDITION_FIELDS
from neobench.core.errors import NeobenchError, check_choice, collect, writable_folder_problems
from neobench.report.columns import AVG, DOWN, UP
from neobench.report.table import LeaderTable, Row


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


def output_format(
    fmt: str | None, out: str | None, plot: str | None, html: str | None = None
) -> str:
    """The format `neobench table` writes: --format, else the --out suffix, else rich; refuses a
    rich --out, a --plot that is not PNG, an --html that is not .html and an --out/--plot/--html
    folder that cannot be written, all at once."""
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
    if html and Path(html).suffix.lower() not in (".html", ".htm"):
        problems.append(f"--html {html}: the page is one HTML file; name it *.html.")
    for flag, target in (("--out", out), ("--plot", plot), ("--html", html)):
        if target:
            problems += writable_folder_problems(
                Path(target).parent, f"{flag} {target}: its folder", "Write it somewhere else."
            )
    if problems:
        raise NeobenchError(problems)
    return chosen
