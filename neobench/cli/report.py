"""`neobench table`, `compare`, `plan` and `overlap`: results read back as a table, a paired
comparison, a seeds plan, or scored against measured contamination."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neobench.cli import commands
from neobench.cli.output import out, print_listing, say
from neobench.protocol import listing
from neobench.protocol.config import (
    CompareOptions,
    OverlapOptions,
    PlanOptions,
    TableOptions,
    options,
)


def cmd_table(cfg: commands.TableCommand) -> int:
    """leaderboard table of evaluated models"""
    from neobench.core.card_io import write_text_atomic
    from neobench.report import leaderboard as tables
    from neobench.report.render import table as render
    from neobench.report.render import terminal

    fmt = render.output_format(cfg.format, cfg.out, cfg.plot, cfg.html)
    table = _glue_table(cfg) if cfg.glue else tables.leaderboard(**options(cfg, TableOptions))
    if fmt == render.RICH:
        terminal.print_rich(table, out)
    elif cfg.out:
        replaced = Path(cfg.out).exists()
        write_text_atomic(Path(cfg.out), render.write(table, fmt))
        say(f"{'replaced' if replaced else 'wrote'} {cfg.out}", markup=False)
    else:
        out.print(render.write(table, fmt), markup=False, highlight=False, soft_wrap=True)
    if cfg.plot:
        render.plot(table, Path(cfg.plot))
        say(f"wrote {cfg.plot}", markup=False)
    if cfg.html:
        _write_page(cfg)
    return 0


# `table`'s flags that name MTEB's benchmark, its task types or its task-level resampling, and
# what they are set to by default: with --glue, a flag changed from it is refused.
NOT_GLUE = ("benchmark", "per_task", "over", "zero_shot_only", "ranks", "per_type")


def _glue_table(cfg: commands.TableCommand) -> Any:
    from neobench.core.errors import NeobenchError
    from neobench.report.glue import glue_table

    defaults = TableOptions()
    given = [k for k in NOT_GLUE if getattr(cfg, k) != getattr(defaults, k)]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise NeobenchError(
            f"--glue with {flags}: the GLUE table has one column per GLUE task and resamples "
            "the validation items; those flags are MTEB's. Leave them out (--out writes md, "
            "csv, tex or json; --plot a PNG; --html the page)."
        )
    return glue_table(
        cfg.results, models=cfg.models, reference=cfg.reference, ci=cfg.ci,
        baseline=cfg.baseline, resamples=cfg.resamples, seed=cfg.seed, strict=cfg.strict,
    )  # fmt: skip


def _write_page(cfg: commands.TableCommand) -> None:
    """The leaderboard page: the table's rows with every view and pair computed for it."""
    from neobench.core.card_io import write_text_atomic
    from neobench.report.glue_page import glue_page_data
    from neobench.report.page import page_data
    from neobench.report.render import html

    # The flags the table and its page share: which rows, and how they are resampled.
    keys = ("models", "reference", "baseline", "resamples", "seed")
    given = {k: getattr(cfg, k) for k in keys}
    if cfg.glue:
        data = glue_page_data(cfg.results, **given, strict=cfg.strict)
    else:
        data = page_data(cfg.results, cfg.benchmark, **given, over=cfg.over)
    text = html.to_html(data)
    write_text_atomic(Path(cfg.html), text)
    say(f"wrote {cfg.html} ({len(text.encode()) / 1024:,.0f} KiB)", markup=False)


def cmd_compare(cfg: commands.CompareCommand) -> int:
    """paired comparison with a baseline: differences, intervals, p-values"""
    from neobench.core.card_io import write_text_atomic
    from neobench.report import compare as comparison
    from neobench.report.render import compare

    if cfg.out:
        compare.check_out(cfg.out)  # before the work, not after it
    found = comparison.compare(**options(cfg, CompareOptions))
    if cfg.out:
        write_text_atomic(Path(cfg.out), compare.output_text(found, cfg.out))
        say(f"wrote {cfg.out}", markup=False)
        return 0
    print_listing(listing.Listing(f"compared with {found.baseline}", compare.COLUMNS, [
        compare.cells(r) for r in found.rows
    ]))  # fmt: skip
    for line in [compare.legend(found), *found.notes]:
        say(line, markup=False)
    return 0


def cmd_plan(cfg: PlanOptions) -> int:
    """seeds planner: the difference N seeds detect, and the seeds a difference needs"""
    from neobench.report.planner import PLAN_LEGEND, plan_seeds

    found = plan_seeds(**options(cfg, PlanOptions))
    print_listing(found.listing())
    for note in [*found.notes, PLAN_LEGEND]:
        say(note, markup=False)
    return 0


def cmd_overlap(cfg: commands.OverlapCommand) -> int:
    """measured contamination: evaluation texts that occur in a manifest's training data"""
    from neobench.core.card_io import write_text_atomic
    from neobench.report.contamination import overlap_report

    if cfg.json and Path(cfg.json).suffix != ".json":
        from neobench.core.errors import NeobenchError

        raise NeobenchError(
            f"--json {cfg.json}: the measurements are written as JSON; name it *.json."
        )
    found = overlap_report(**options(cfg, OverlapOptions))
    print_listing(found.listing())
    if found.scores:
        print_listing(found.score_listing())
    for note in found.notes:
        say(note, markup=False)
    if cfg.json:
        write_text_atomic(Path(cfg.json), found.to_json())
        say(f"wrote {cfg.json}", markup=False)
    return 0
