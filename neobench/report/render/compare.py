"""Writers of a comparison (`neobench compare`): terminal cells, Markdown, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.report.compare import Comparison, Row, record_keys
from neobench.report.render.table import md_cell

COLUMNS = (
    "model",
    "task",
    "baseline",
    "score [95% CI]",
    "delta [95% CI]",
    "p",
    "p (Holm)",
    "significant",
)


def cells(row: Row) -> list[str]:
    mark = ("higher" if row.delta > 0 else "lower") if row.significant else ""
    sd = "" if row.seed_sd is None else f" sd {100 * row.seed_sd:.1f}"
    return [
        row.label,
        row.task,
        f"{100 * row.baseline_score:.1f}",
        f"{100 * row.score:.1f}{'†' if row.in_domain else ''} "
        f"[{100 * row.score_ci_low:.1f}, {100 * row.score_ci_high:.1f}]" + sd,
        f"{100 * row.delta:+.1f} [{100 * row.ci_low:+.1f}, {100 * row.ci_high:+.1f}]",
        f"{row.p:.3f}",
        f"{row.p_holm:.3f}",
        mark,
    ]


def legend(comparison: Comparison) -> str:
    text = (
        f"Baseline: {comparison.baseline}. Scores x100. [ ] = 95% paired-bootstrap interval "
        f"({comparison.resamples} resamples of each task's units, seed {comparison.seed}); "
        f"p two-sided; Holm over each model's tasks; higher/lower = significant at "
        f"{comparison.alpha:g} after Holm. Avg. = mean over the compared tasks, tasks fixed."
    )
    if comparison.baseline_seeds is not None or any(r.seeds for r in comparison.rows):
        text += (
            " Models '(N seeds)': scores are means over N fine-tuning seeds, 'sd' their standard "
            "deviation over the seeds; their intervals and p-values resample the seeds (each "
            "side on its own), then the same items on both sides."
        )
    return text


def to_markdown(comparison: Comparison) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    lines += ["| " + " | ".join(map(md_cell, cells(r))) + " |" for r in comparison.rows]
    return "\n".join([*lines, "", legend(comparison), *comparison.notes]) + "\n"


def to_csv(comparison: Comparison) -> str:
    """A line per (model, task) row, every key of `Row.record` a column (seeds space-separated),
    after "#" lines naming the baseline and the notes."""
    buffer = io.StringIO()
    seeds = comparison.baseline_seeds
    of_seeds = f" (seeds {' '.join(map(str, seeds))})" if seeds is not None else ""
    for line in [f"neobench compare: baseline {comparison.baseline}{of_seeds}", *comparison.notes]:
        buffer.write(f"# {line}\n")
    writer = csv.DictWriter(buffer, fieldnames=record_keys(), lineterminator="\n")
    writer.writeheader()
    for row in comparison.rows:
        record = row.record()
        seeds = record["seeds"]
        writer.writerow({**record, "seeds": " ".join(map(str, seeds)) if seeds else None})
    return buffer.getvalue()


def to_json(comparison: Comparison) -> str:
    body = {
        "baseline": comparison.baseline,
        "baseline_fields": comparison.baseline_fields,
        "resamples": comparison.resamples,
        "seed": comparison.seed,
        "alpha": comparison.alpha,
        "rows": [r.record() for r in comparison.rows],
        "notes": comparison.notes,
    }
    if comparison.baseline_seeds is not None:
        body["baseline_seeds"] = comparison.baseline_seeds
    return json.dumps(body, indent=1) + "\n"


WRITERS = {".md": to_markdown, ".csv": to_csv, ".json": to_json}


def check_out(out: str) -> None:
    from neobench.core.errors import writable_folder_problems

    problems = []
    if Path(out).suffix.lower() not in WRITERS:
        problems.append(f"--out {out}: name it *.md, *.csv or *.json.")
    problems += writable_folder_problems(
        Path(out).parent, f"--out {out}: its folder", "Write it somewhere else."
    )
    if problems:
        raise NeobenchError(problems)


def output_text(comparison: Comparison, out: str) -> str:
    check_out(out)
    return WRITERS[Path(out).suffix.lower()](comparison)
