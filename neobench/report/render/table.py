"""Render a leaderboard table (its numbers decided by report/table.py): Markdown, CSV, LaTeX,
JSON, PNG; the terminal is render/terminal.py."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from neobench.core.errors import NeobenchError, check_choice, collect, writable_folder_problems
from neobench.core.runs import NAMES
from neobench.report import ranks as ranks_mod
from neobench.report.columns import AVG, DOWN, MARK_WORDS, UP
from neobench.report.table import CHANGED, LeaderTable, Row


def to_markdown(table: LeaderTable) -> str:
    header = table.header()
    lines = [
        f"**{table.benchmark}**",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(map(md_cell, table.cells(row))) + " |" for row in table.rows]
    lines += [
        "",
        *(f"- {note}" for note in table.notes),
        "",
        "Sources:",
        *(f"- {s}" for s in table.sources),
    ]
    return "\n".join(lines) + "\n"


def md_cell(text: str) -> str:
    """``text`` as a Markdown table cell: a "|" (in a model name) would end the cell."""
    return text.replace("|", "\\|")


def to_csv(table: LeaderTable) -> str:
    """One row per table row, plain numbers only: each score column followed, with --ci, by
    ``<column>_ci_low`` / ``_ci_high`` and, with --baseline, ``<column>_mark``."""
    buffer = io.StringIO()
    for line in ["neobench table: " + table.benchmark, *table.notes, "Sources:", *table.sources]:
        buffer.write(f"# {line}\n")
    writer = csv.writer(buffer)
    extra = _CsvExtra(_has_intervals(table), table.baseline is not None, table.ranked)
    writer.writerow(_csv_header(table, extra))
    for row in table.rows:
        writer.writerow(_csv_row(table, row, extra))
    return buffer.getvalue()


def _csv_header(table: LeaderTable, extra: _CsvExtra) -> list[str]:
    """The run's names first, its conditions last."""
    shown = table.columns_shown()
    scores = [h for t in shown for h in extra.header(t)]
    counts = [] if table.per_task else [f"{t}_tasks" for t in shown]
    avg = [*extra.header("avg", AVG), *([] if table.per_task else ["avg_tasks", "mean_task_type"])]
    tail = ["missing_tasks", "quoted", *(["zero_shot", "in_domain"] * table.zero_shot_fields)]
    return [*NAMES, *scores, *counts, *avg, *tail, *table.record_fields]


def _csv_row(table: LeaderTable, row: Row, extra: _CsvExtra) -> list[object]:
    shown = table.columns_shown()
    run = [_cell(row.identity.get(k)) for k in NAMES]
    scores = [c for t in shown for c in extra.cells(row, t, table.score(row, t))]
    counts = (
        [] if table.per_task else [f"{row.types[t].present}/{row.types[t].total}" for t in shown]
    )
    avg = extra.cells(row, AVG, row.avg)
    if not table.per_task:
        avg += ["{}/{}".format(*row.avg_of), _num(row.mean_types)]
    tail = [len(row.missing), row.quoted]
    if table.zero_shot_fields:
        tail += [row.zero_shot_text(), " ".join(_in_domain(row))]
    conditions = [_cell(v) for v in table.record(row).values()]
    return [*run, *scores, *counts, *avg, *tail, *conditions]


def _in_domain(row: Row) -> list[str]:
    """The tasks the row's model trained on, of those it holds."""
    return sorted(c for c in row.in_domain if c in row.tasks)


def _cell(value: object) -> object:
    """A CSV cell of a names or conditions field: a list (seeds) space-separated, None empty."""
    if isinstance(value, list):
        return " ".join(map(str, value))
    return "" if value is None else value


@dataclass(frozen=True)
class _CsvExtra:
    ci: bool
    marks: bool
    ranked: list[str]  # --ranks: the columns with rank, rank_ci_low, rank_ci_high, group

    def header(self, name: str, column: str | None = None) -> list[str]:
        """``name``'s header and its extras; ``column``: the table's name of it, when another."""
        ranks = ranks_mod.fields(None, _rank_prefix(column or name))
        return [
            name,
            *((f"{name}_ci_low", f"{name}_ci_high") if self.ci else ()),
            *((f"{name}_mark",) if self.marks else ()),
            *(ranks if (column or name) in self.ranked else ()),
        ]

    def cells(self, row: Row, column: str, value: float | None) -> list[object]:
        # An empty score (a missing task, Avg. of an incomplete row) has no interval or mark.
        low_high = row.ci.get(column) if value is not None else None
        mark = row.marks.get(column, "") if value is not None else ""
        ranks = ranks_mod.fields(row.ranks.get(column), _rank_prefix(column))
        return [
            _num(value),
            *((_num(low_high[0]), _num(low_high[1])) if self.ci and low_high else ()),
            *(("", "") if self.ci and not low_high else ()),
            *((MARK_WORDS.get(mark, ""),) if self.marks else ()),
            *((_cell(v) for v in ranks.values()) if column in self.ranked else ()),
        ]


def _rank_prefix(column: str) -> str:
    """Avg.'s rank fields are plain (rank, group, ...); a type's carry its name."""
    return "" if column == AVG else f"{column}_"


def _has_intervals(table: LeaderTable) -> bool:
    return any(row.ci for row in table.rows) or any(n.startswith("±") for n in table.notes)


def to_json(table: LeaderTable) -> str:
    """One object per row: names, conditions and, per column, score (x100, unrounded),
    interval, mark and seed sd."""
    body = {
        "benchmark": table.benchmark,
        "per_task": table.per_task,
        "columns": [*table.columns_shown(), AVG],
        "baseline": table.baseline,
        "rows": [_json_row(table, row) for row in table.rows],
        "notes": table.notes,
        "sources": table.sources,
    }
    return json.dumps(body, indent=1, ensure_ascii=False) + "\n"


def _json_row(table: LeaderTable, row: Row) -> dict[str, object]:
    def column(name: str, value: float | None, tasks: tuple[int, int] | None) -> dict:
        low_high = row.ci.get(name) if value is not None else None
        return {
            "score": value,
            "ci": list(low_high) if low_high else None,
            "mark": MARK_WORDS.get(row.marks.get(name, "")) if value is not None else None,
            "seed_sd": row.sd.get(name),
            **({"tasks": list(tasks)} if tasks else {}),
            **(ranks_mod.fields(row.ranks.get(name)) if name in table.ranked else {}),
        }

    def tasks(t: str) -> tuple[int, int] | None:
        return None if table.per_task else (row.types[t].present, row.types[t].total)

    cells = {t: column(t, table.score(row, t), tasks(t)) for t in table.columns_shown()}
    return {
        **row.identity,
        "quoted": row.quoted,
        "columns": cells | {AVG: column(AVG, row.avg, row.avg_of)},
        "mean_task_type": row.mean_types,
        "missing_tasks": row.missing,
        # tasks whose result file differs from its run card: never a score (core/results.py)
        **({"changed_tasks": row.mismatched} if row.mismatched else {}),
        **(
            {"zero_shot": row.zero_shot, "in_domain": _in_domain(row)}
            if table.zero_shot_fields
            else {}
        ),
        **table.record(row),
    }


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
    # What ± and ▲ / ▼ mean is typeset under the table, not only commented.
    legend = [n for n in table.notes if n.startswith(("±", UP))]
    if legend:
        lines += ["\\par\\smallskip", "{\\footnotesize", *(_tex(n) + "\\par" for n in legend), "}"]
    return "\n".join(lines) + "\n"


def plot(table: LeaderTable, path: Path) -> None:
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
    CHANGED: "$\\times$",
}


# name -> (file suffix, writer): --format, the --out suffix and the messages all read this.
FORMATS = {
    "md": (".md", to_markdown),
    "csv": (".csv", to_csv),
    "latex": (".tex", to_latex),
    "json": (".json", to_json),
}
RICH = "rich"  # the terminal: printed, never written to a file


def write(table: LeaderTable, fmt: str) -> str:
    """The table as the text of one file format."""
    return FORMATS[fmt][1](table)


def output_format(
    fmt: str | None, out: str | None, plot: str | None, html: str | None = None
) -> str:
    """The format `neobench table` writes: --format, else the --out suffix, else rich; every
    problem with --out, --plot and --html refused at once."""
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
