"""neobench from Python: the functions the CLI calls, with keyword arguments for its flags
(underscores for dashes; an unknown one refused with the closest names). Each returns a typed
object with ``to_pandas()``; every problem is a NeobenchError. Examples, the frames' columns and
scale, and what is printed: docs/guide.md, "The Python API".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core.errors import NeobenchError, did_you_mean
from neobench.protocol import config

if TYPE_CHECKING:
    import pandas as pd

    from neobench.core.runs import Run
    from neobench.evaluation.outcomes import EvalSummary
    from neobench.glue.grid import GlueSummary
    from neobench.publishing.run import Published
    from neobench.report.compare import Comparison
    from neobench.report.contamination import OverlapReport
    from neobench.report.planner import SeedsPlan
    from neobench.report.table import LeaderTable
    from neobench.reproduction.check import Reproduction
    from neobench.study.plan import Plan
    from neobench.train.finetune import FinetuneSummary

__all__ = [
    "NeobenchError",
    "Runs",
    "Study",
    "compare",
    "evaluate",
    "finetune",
    "glue_table",
    "leaderboard",
    "load_runs",
    "load_study",
    "overlap",
    "plan",
    "publish",
    "reproduce",
    "run_glue",
]

PathLike = str | Path


def finetune(
    model: str | Path,
    output: PathLike,
    *,
    recipe: str = config.STANDARD_RECIPE,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = False,
    **options: Any,
) -> FinetuneSummary | list[FinetuneSummary]:
    """Fine-tune ``model`` with ``recipe`` into ``output``; `neobench finetune`'s flags as
    keywords (``seed=1``, ``data_dir=...``, ``resume=True``). ``overrides`` change recipe
    values (``{"max_steps": 40}``). With ``seeds=[0, 1, 2]`` one run per seed, a list back.
    ``on_step`` gets each step's loss-curve entry; ``progress=True`` shows the libraries'
    progress bars (model loading and saving). The summary's ``to_pandas()`` is the loss curve."""
    from neobench.train.finetune import finetune as run_finetune
    from neobench.train.finetune import seed_configs

    if isinstance(overrides, Mapping):
        overrides = [f"{key}={_value(value)}" for key, value in overrides.items()]
    if "seeds" in options and options["seeds"] is not None:
        options["seeds"] = [str(s) for s in options["seeds"]]
    cfg = _config(config.FinetuneConfig, "finetune", options, model=model, output=str(output),
                  recipe=recipe, overrides=list(overrides or []))  # fmt: skip
    with _quiet(not progress):
        if cfg.seeds is None:
            return run_finetune(cfg, on_step=on_step, progress=progress)
        return [
            run_finetune(each, on_step=on_step, progress=progress) for each in seed_configs(cfg)
        ]


def evaluate(model: Any, *, progress: bool = False, **options: Any) -> EvalSummary:
    """Evaluate ``model`` (a folder, a hub id, or a SentenceTransformer held in memory) on MTEB;
    `neobench eval`'s flags as keywords (``tasks=[...]``, ``results="runs"``, ``model_name=...``,
    ``data_dir=...``). Failed tasks are listed in the summary's ``failed``, as the CLI lists
    them; ``progress=True`` shows the libraries' progress bars (model loading, dataset
    preparation). The summary's ``to_pandas()``: one row per task, with the run's ``model``,
    ``revision`` and ``experiment``, ``main_score`` on 0-100 (NaN for a failed task).

    A model in memory is saved to a temporary folder and evaluated from there, as the CLI
    evaluates a saved folder: the same scores, its revision the same content hash of its weights
    (``local-...``), filed under ``model_name`` (default ``local/in-memory``)."""
    import tempfile

    from neobench.evaluation.runner import run_eval

    for key in ("tasks", "types"):
        if isinstance(options.get(key), str):
            options[key] = [options[key]]
    if not _in_memory(model):
        cfg = _config(config.EvalConfig, "evaluate", options, model=model)
        with _quiet(not progress):
            return run_eval(cfg)
    options.setdefault("model_name", IN_MEMORY_NAME)
    with tempfile.TemporaryDirectory(prefix="neobench-in-memory-") as tmp:
        folder = Path(tmp) / "model"
        with _quiet(not progress):
            model.save(str(folder))
            cfg = _config(config.EvalConfig, "evaluate", options, model=str(folder))
            return run_eval(cfg)


def reproduce(
    model: str, *, official: PathLike, progress: bool = False, **options: Any
) -> Reproduction:
    """``model`` against its official MTEB results (``official``: a clone of the results
    repository, or "remote"); `neobench reproduce`'s flags as keywords (``as_name=...`` for
    --as, ``tasks=[...]``, ``data_dir=...``, ``max_seq_length=...``). The result's
    ``to_pandas()``: one row per task, official, reproduced and delta on 0-100 (the tolerance
    is on mteb's 0-1), within, verdict; ``within``: every task matched."""
    from neobench.protocol.tasks import build_registry
    from neobench.reproduction.config import ReproduceCommand
    from neobench.reproduction.run import run_reproduce

    if isinstance(options.get("tasks"), str):
        options["tasks"] = [options["tasks"]]
    build_registry()
    cfg = _config(ReproduceCommand, "reproduce", options, model=model, official=str(official))
    with _quiet(not progress):
        return run_reproduce(cfg)


def publish(results: PathLike, model: str, out: PathLike, **options: Any) -> Published:
    """The run ``model`` (its model name or row label) of the results root ``results`` in the
    MTEB results repository's layout with its model card, in the new folder ``out``;
    `neobench publish`'s flags as keywords (``name=...``, ``submit=CLONE``,
    ``push_to_hub=REPO``, ``verify=K``, ``data_dir=...``). Everything is checked before anything
    is written. The result's ``lines()``: what the CLI prints; ``ok``: every --verify re-run
    within 0.001."""
    from neobench.publishing.config import PublishCommand
    from neobench.publishing.run import run_publish

    given = {"results": str(results), "model": model, "out": str(out)}
    return run_publish(_config(PublishCommand, "publish", options, **given))


IN_MEMORY_NAME = "local/in-memory"  # the results name of a model evaluated from memory


def _in_memory(model: Any) -> bool:
    """Whether ``model`` is a SentenceTransformer object (not a path or a hub id); anything
    else that is not text is refused with what evaluate() takes."""
    if isinstance(model, str | Path):
        return False
    from sentence_transformers import SentenceTransformer

    if isinstance(model, SentenceTransformer):
        return True
    raise NeobenchError(
        f"evaluate(): model is a {type(model).__name__}; give a model folder, a hub id or a "
        "SentenceTransformer (a transformers model: wrap it, or save it and give the folder)."
    )


@contextmanager
def _quiet(silence: bool = True) -> Iterator[None]:
    """The progress bars of transformers, huggingface_hub and datasets off inside the block, as
    they were after it (nothing when ``silence`` is False or HF_HUB_DISABLE_PROGRESS_BARS=0)."""
    import warnings

    from huggingface_hub import constants
    from huggingface_hub import utils as hub

    if not silence or constants.HF_HUB_DISABLE_PROGRESS_BARS is False:
        yield
        return
    import datasets
    from transformers.utils import logging as transformers

    shown = (transformers.is_progress_bar_enabled(), datasets.is_progress_bar_enabled(),
             not hub.are_progress_bars_disabled())  # fmt: skip
    with warnings.catch_warnings():  # a switch an environment variable holds only warns
        warnings.simplefilter("ignore")
        transformers.disable_progress_bar()  # turns huggingface_hub's off too
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if shown[0]:
                transformers.enable_progress_bar()  # turns huggingface_hub's on too
            if shown[1]:
                datasets.enable_progress_bars()
            (hub.enable_progress_bars if shown[2] else hub.disable_progress_bars)()


class Runs(list["Run"]):
    """The runs under some results roots (seed replicates merged into one), with the files that
    could not be read and what was merged."""

    problems: list[str]
    notes: list[str]

    def to_pandas(self) -> pd.DataFrame:
        """One row per run and task: label, model, revision, experiment, seeds (a list, for
        seed replicates), the run's conditions (one column each, as in compare's rows), the
        task and its main score (0-100, float64), as leaderboard() and compare() name them."""
        from neobench.report.frames import runs_frame

        return runs_frame(self)


def load_runs(
    results: PathLike | Sequence[PathLike] = ".", *, benchmark: str = config.DEFAULT_BENCHMARK
) -> Runs:
    """Every run under the results root(s) on ``benchmark``'s tasks, as `neobench table` reads
    them."""
    from neobench.protocol.tasks import load_benchmark
    from neobench.report.load import load

    found, problems, notes = load(_roots(results), list(load_benchmark(benchmark).tasks))
    runs = Runs(found)
    runs.problems, runs.notes = problems, notes
    return runs


def leaderboard(results: PathLike | Sequence[PathLike] = ".", **options: Any) -> LeaderTable:
    """The Table 4 layout of `neobench table` (its flags as keywords: ``ci=True``,
    ``baseline=...``, ``reference="paper"``, ``per_task=True``, ``models=[...]``). Its
    ``to_pandas()``: one row per table row, a float64 column per type (per task with
    ``per_task=True``) and ``Avg.``, on 0-100 as the table prints them, with ``_ci_low`` /
    ``_ci_high``, ``_sd`` and ``_mark`` columns beside each where the table has them."""
    from neobench.report import leaderboard as tables

    cfg = _config(config.TableOptions, "leaderboard", options, results=_roots(results))
    return tables.leaderboard(**dataclasses.asdict(cfg))


def run_glue(
    model: str | Path,
    tasks: Sequence[str],
    output: PathLike,
    *,
    overrides: Mapping[str, Any] | None = None,
    progress: bool = False,
    **options: Any,
) -> GlueSummary:
    """`neobench glue`: ``model`` fine-tuned on each GLUE task at every point of ``grid``
    ("small", "paper", "paper-table6" or a YAML file) and seed, complete runs skipped; the
    selection and the reported validation score per task. Its flags as keywords (``grid``,
    ``seeds``, ``data_dir``, ``recipe``, ``model_name``, ``device``, ``dry_run``);
    ``overrides``: recipe values as ``--set`` takes them (``{"select_on": "validation"}``)."""
    from neobench.glue import grid

    allowed = ("grid", "seeds", "recipe", "data_dir", "model_name", "device", "dry_run", "point",
               "trust_remote_code")  # fmt: skip
    _known_keywords("run_glue", options, [*allowed, "overrides"])
    given = {k: str(v) if isinstance(v, Path) else v for k, v in options.items()}
    texts = {k: _value(v) for k, v in (overrides or {}).items()}
    say = _log_line if progress else (lambda _: None)
    return grid.run_glue(str(model), list(tasks), str(output), overrides=texts, say=say, **given)


def glue_table(results: PathLike | Sequence[PathLike] = ".", **options: Any) -> LeaderTable:
    """`neobench table --glue`: the GLUE runs under ``results`` in the paper's GLUE layout (its
    flags as keywords: ``ci=True``, ``baseline=...``, ``reference="paper"``, ``models=[...]``,
    ``strict=True``, ``resamples``, ``seed``). Its ``to_pandas()``: a column per task and
    ``Avg.`` on 0-100, with ``_ci_low`` / ``_ci_high``, ``_sd`` and ``_mark`` where present."""
    from neobench.report.glue import glue_table as table

    allowed = ["models", "reference", "ci", "baseline", "resamples", "seed", "strict"]
    _known_keywords("glue_table", options, allowed)
    return table(_roots(results), **options)


def compare(results: PathLike | Sequence[PathLike], baseline: str, **options: Any) -> Comparison:
    """`neobench compare`: each model against ``baseline``, paired per task (its flags as
    keywords: ``models=[...]``, ``tasks=[...]``, ``resamples=...``, ``seed=...``). Its
    ``to_pandas()``: the rows of `compare --out`, same columns, with ``baseline_score``,
    ``score``, ``delta``, their intervals and ``seed_sd`` on 0-100 (the JSON keeps mteb's 0-1),
    ``p`` and ``p_holm`` as they are."""
    from neobench.report import compare as comparison

    given = {"results": _roots(results), "baseline": baseline}
    cfg = _config(config.CompareOptions, "compare", options, **given)
    return comparison.compare(**dataclasses.asdict(cfg))


def plan(results: PathLike | Sequence[PathLike] = ".", **options: Any) -> SeedsPlan:
    """`neobench plan`: from the pilot under ``results``, the difference ``seeds=N`` seeds per
    backbone detect at 80% power, and with ``delta=D`` the power and the seeds D needs, per type
    and for Avg. Its ``to_pandas()``: one row per column."""
    from neobench.report.planner import plan_seeds

    cfg = _config(config.PlanOptions, "plan", options, results=_roots(results))
    return plan_seeds(**dataclasses.asdict(cfg))


def overlap(manifest: str, **options: Any) -> OverlapReport:
    """`neobench overlap`: each task's test units and texts found in ``manifest``'s training
    data (exact after normalisation, and near-duplicates), with ``results=...`` and
    ``decontaminated=True`` each run's score without the units in training (its interval
    beside the full score)."""
    from neobench.report.contamination import overlap_report

    cfg = _config(config.OverlapOptions, "overlap", options, manifest=manifest)
    return overlap_report(**dataclasses.asdict(cfg))


class Study:
    """A study file read and planned (`neobench study run --dry-run`): its jobs, what is done,
    and the means to run it, follow it and read its table."""

    def __init__(self, file: PathLike, output: PathLike | None = None) -> None:
        self.file, self.output = str(file), None if output is None else str(output)
        self.plan: Plan = self.replan()

    def replan(self) -> Plan:
        """The plan read again from the study's outputs (what is done now)."""
        from neobench.study.plan import build_plan

        self.plan = build_plan(self.file, self.output)
        return self.plan

    def to_pandas(self) -> pd.DataFrame:
        """One row per job: key, kind, model, seed, shard, state, resources, log."""
        import pandas as pd

        from neobench.study import store

        listed = store.queues(self.plan)
        rows = [
            {"job": j.key, "kind": j.kind.value, "model": j.model, "seed": j.seed,
             "shard": f"{j.shard[0]}/{j.shard[1]}" if j.shard else None,
             "state": store.state(self.plan, j, listed),
             "resources": j.resources.text() if j.resources else None, "log": str(j.log)}
            for j in self.plan.jobs
        ]  # fmt: skip
        return pd.DataFrame(rows)

    def run(self, launcher: str = "local", *, wait: bool = False, canary: bool = False) -> Plan:
        """Run (local) or submit (slurm) the jobs still to do, holding the study's lock; the
        plan read again afterwards."""
        from neobench.study import canary as canaries
        from neobench.study import launchers, lock

        module = launchers.launcher(launcher)
        plan = self.replan()
        with lock.runner(plan.study.output, self.file):
            if plan.pending and canaries.wanted(plan, launcher, canary, refused=False):
                canaries.run(plan, launcher, _log_line)
            module.run(plan, _log_line, file=self.file, wait=wait)
        return self.replan()

    def table(self, **options: Any) -> LeaderTable:
        """The study's table (leaderboard() of its results, its baseline and reference)."""
        from neobench.study.plan import table_inputs

        given = table_inputs(self.plan.study, self.plan.jobs)
        options = {"reference": given["reference"], "baseline": given["baseline"], **options}
        return leaderboard(given["results"], benchmark=given["benchmark"], **options)


def load_study(file: PathLike, output: PathLike | None = None) -> Study:
    """A study file, checked and planned; every problem of the file at once."""
    return Study(file, output)


def _config(cls: type, where: str, options: dict[str, Any], **given: Any) -> Any:
    """``cls`` built from keywords; unknown keywords refused, all at once, with the closest."""
    _known_keywords(where, options, [f.name for f in dataclasses.fields(cls)])
    # Paths are accepted wherever the flag takes one; the configs hold them as text.
    values = {k: str(v) if isinstance(v, Path) else v for k, v in {**given, **options}.items()}
    return cls(**values)


def _known_keywords(where: str, options: Mapping[str, Any], names: list[str]) -> None:
    """Unknown keywords of ``where()`` refused, all at once, with the closest names."""
    unknown = [key for key in options if key not in names]
    if unknown:
        raise NeobenchError([
            f"{where}(): unknown keyword {key!r}.{did_you_mean(key, names)}" for key in unknown
        ])  # fmt: skip


def _roots(results: PathLike | Sequence[PathLike]) -> list[str]:
    if isinstance(results, str | Path):
        return [str(results)]
    return [str(r) for r in results]


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _log_line(text: str, markup: bool = True) -> None:
    import logging

    logging.getLogger("neobench").info("%s", text)
