"""What a study's names must be (checked by the commands' own loaders, so a plan never holds a
job its command would refuse), and whether finished pieces were made under its conditions (the
fields compared: docs/studies.md, "What is done, and re-running").
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core import cards as record
from neobench.core import results
from neobench.core.conditions import PINNED, Conditions
from neobench.core.errors import NeobenchError, check_choice, collect
from neobench.protocol import config
from neobench.study.spec import Eval, Finetune

logger = logging.getLogger(__name__)

START_OVER = (
    "Restore the study's earlier values, or give the study another output (--output) so the "
    "two sets of conditions never share a table."
)


def recipe_problems(tune: Finetune, problems: list[str]) -> None:
    """The recipe, the overrides and the tracker, checked as `neobench finetune` checks them."""
    from neobench.protocol.recipe import apply_overrides, load_recipe
    from neobench.train.inputs import tracker_problems

    found: list[str] = []
    recipe = collect(found, load_recipe, tune.recipe)
    if recipe is not None:
        collect(found, apply_overrides, recipe, tune.overrides)
    # The flag's messages, in the study's words (its key).
    found += [p.replace("--report-to", "report_to") for p in tracker_problems(tune.report_to)]
    problems += [f"finetune: {p}" for p in found]


def eval_problems(ev: Eval, problems: list[str]) -> list[Any] | None:
    """The benchmark's selected tasks; each unknown name (benchmark, task, type, profile) and
    each bad value is a problem."""
    from neobench.models.load import parse_max_seq_length
    from neobench.protocol.instructions import load_profile
    from neobench.protocol.tasks import load_benchmark, select_tasks

    found: list[str] = []
    values = ev.conditions()
    collect(found, load_profile, values["instructions"])
    collect(found, parse_max_seq_length, values["max_seq_length"])
    collect(found, check_choice, "dtype", ev.dtype, config.DTYPE_CHOICES)
    benchmark = collect(found, load_benchmark, ev.benchmark)
    pick = functools.partial(select_tasks, types_flag="--types")  # a type given as a task
    tasks = collect(found, pick, benchmark, ev.tasks, ev.types) if benchmark else None
    # The task loader speaks of its flags; in a study they are keys of `eval:`.
    found = [p.replace("--tasks", "tasks").replace("--types", "types") for p in found]
    problems += [f"eval: {p}" for p in found]
    return tasks


def finetune_conflicts(card_path: Path, model: str, tune: Finetune, seed: int) -> list[str]:
    """How a fine-tuning run already in the study's folder differs from what the study asks."""
    from neobench.protocol.recipe import parse_overrides

    given = record.read_finetune_card(card_path).config
    keys = ("model", "finetune.recipe", "finetune.overrides", "seed")
    overrides = parse_overrides(list(given.get("overrides") or []))
    there = (given.get("model"), given.get("recipe"), overrides, given.get("seed"))
    now = (model, tune.recipe, tune.overrides, seed)
    return _differ(card_path.parent, "fine-tuned", dict(zip(keys, there, strict=True)),
                   dict(zip(keys, now, strict=True)))  # fmt: skip


def _differ(where: Path, what: str, there: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """A fine-tune's settings there and in the study, compared as text (its overrides parsed)."""
    differing = {k: (str(there[k]), str(now[k])) for k in now if str(there[k]) != str(now[k])}
    return [_conflict(where, what, differing)] if differing else []


def _conflict(where: Path, what: str, differing: dict[str, tuple[str, str]]) -> str:
    fields_text = "; ".join(f"{k}: {a} there, {b} in the study" for k, (a, b) in differing.items())
    return (
        f"{where} was {what} under other conditions than the study now gives ({fields_text}). "
        + START_OVER
    )


def finished_at(folder: Path) -> str | None:
    """When the fine-tuning run in ``folder`` finished (ISO time), if it did."""
    card = folder / record.FINETUNE_CARD
    return record.read_finetune_card(card).finished if card.is_file() else None


@dataclass
class _Card:
    path: Path
    started: str
    config: dict[str, Any]


@dataclass
class EvalCards:
    """The eval run cards under a study's results root, by the model name they were run for."""

    by_name: dict[str, list[_Card]] = field(default_factory=dict)

    @classmethod
    def scan(cls, root: Path) -> EvalCards:
        found = cls()
        for path in sorted(results.all_card_paths(root)):
            try:
                card = record.read_eval_card(path)
            except NeobenchError as error:
                logger.warning("skipped an unreadable run card: %s", error)
                continue
            name = str(card.config.get("model_name") or card.model.name)
            entry = _Card(path, str(card.started or ""), card.config)
            found.by_name.setdefault(name, []).append(entry)
        return found

    def folder(self, name: str, since: str | None = None, source: str | None = None) -> Path | None:
        """The results folder of the newest eval of ``name`` (started after ``since``, of the
        model folder ``source``: the seeds of one model share its name)."""
        cards = [
            c
            for c in self.by_name.get(name, [])
            if (since is None or c.started >= since)
            and (source is None or str(c.config.get("model")) == source)
        ]
        if not cards:
            return None
        # run card: <folder>/neobench/run-*.yaml
        return max(cards, key=lambda c: c.started).path.parent.parent


def eval_conflicts(found: EvalCards, name: str, asked: Mapping[str, str]) -> None:
    """Refuse when an eval of ``name`` already ran asked for other conditions than the study's
    eval section gives (``asked``: `Eval.conditions()`), by the one rule of core/conditions.py.
    The benchmark is given, not pinned: a result serves every benchmark holding its task, so a
    study may move to another benchmark on the same results."""
    now = Conditions.asked(asked)
    for card in found.by_name.get(name, []):
        differing = Conditions.asked(card.config).differences(now, PINNED)
        if differing:  # one card says it; its siblings would repeat it
            raise NeobenchError(_conflict(card.path, f"evaluated for {name}", {
                f"eval.{k}": pair for k, pair in differing.items()
            }))  # fmt: skip
