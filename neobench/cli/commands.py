"""The configs of the commands only the CLI runs (ls, data, cache, study), built into argparse by
flags.py; those of `eval`, `finetune`, and the options `table` and `compare` share with the API
are in neobench/protocol/config.py (the output flags added here)."""

from __future__ import annotations

from dataclasses import dataclass

from neobench.protocol.config import (
    DEFAULT_BENCHMARK,
    LISTINGS,
    STANDARD_RECIPE,
    CompareOptions,
    OverlapOptions,
    TableOptions,
    like,
    opt,
)
from neobench.report.render.table import FORMATS, RICH
from neobench.study.launchers import LAUNCHERS, launcher_help
from neobench.study.spec import CANARY_GPU_HOURS

TABLE_FORMATS = (RICH, *FORMATS)


@dataclass(kw_only=True)
class TableCommand(TableOptions):
    """`neobench table`: which results, which rows, which output."""

    format: str | None = opt(
        None,
        f"output format: {' | '.join(TABLE_FORMATS)} (default: {RICH}, or from the --out suffix)",
        choices=TABLE_FORMATS,
        after="benchmark",
    )
    out: str | None = opt(
        None,
        f"write the table to this file ({', '.join(s for s, _ in FORMATS.values())})",
        after="format",
    )
    plot: str | None = opt(
        None,
        "also write a PNG forest plot: a panel per type (or task) and Avg., each row a point "
        "with its 95% interval (--ci), paper rows as grey diamonds",
        after="per_task",
    )
    html: str | None = opt(
        None,
        "also write the leaderboard as one self-contained HTML page (sortable, filters, "
        "per-task drill-down, A/B of two rows; opens offline): docs/leaderboard-page.md",
        after="plot",
    )
    glue: bool = opt(
        False,
        "the GLUE runs under --results (`neobench glue`) in the paper's GLUE table layout: a "
        "column per task, --reference paper its Table 3 (docs/glue.md)",
        after="benchmark",
    )


@dataclass(kw_only=True)
class CompareCommand(CompareOptions):
    """`neobench compare`: paired differences against a baseline, per task and on average."""

    out: str | None = opt(
        None, "write the comparison to this file (.md, .csv or .json)", after="seed"
    )


@dataclass(kw_only=True)
class OverlapCommand(OverlapOptions):
    """`neobench overlap`: where its answer is written."""

    json: str | None = opt(
        None, "also write the measurements (and the contaminated unit ids) as JSON"
    )


@dataclass(kw_only=True)
class LsCommand:
    """`neobench ls`: what to list."""

    what: str = opt(help="what to list", positional=True, choices=LISTINGS)
    recipe: str = opt(STANDARD_RECIPE, "recipe whose keys or datasets are listed")
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose tasks are listed")


@dataclass(kw_only=True)
class PrefetchCommand:
    """`neobench data prefetch`: what to snapshot, and where."""

    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose datasets are fetched")
    tasks: list[str] | None = opt(None, "comma-separated subset of the benchmark's tasks", csv=True)
    out: str = opt(help="mirror folder to create or complete")
    recipe: str | None = opt(None, "also every training dataset of this recipe's manifest")


@dataclass(kw_only=True)
class VerifyCommand:
    """`neobench data verify`: which mirror, checked against what."""

    dir: str = opt(help="mirror folder", positional=True)
    recipe: str | None = opt(None, "check this recipe's training datasets instead of a benchmark")
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose datasets are checked")
    tasks: list[str] | None = opt(None, "comma-separated subset of the benchmark's tasks", csv=True)
    no_load: bool = opt(False, "check folders only, do not load the data")


@dataclass(kw_only=True)
class DataCheckCommand:
    """`neobench data check`: which manifest, for which recipe, against which data."""

    manifest: str | None = opt(
        None, "manifest name or file (default: the recipe's)", metavar="NAME|PATH.yaml"
    )
    recipe: str = opt(
        STANDARD_RECIPE,
        "recipe whose max_hard_negatives the rows must hold (and whose manifest is the default)",
    )
    data_dir: str | None = opt(
        None,
        "mirror <dir>/<hf repo id>/ (and the rows' local data_files) to check the rows it holds "
        "in (default: $NEOBENCH_DATA_DIR); the other rows are checked on the hub when it is "
        "reachable",
    )


@dataclass(kw_only=True)
class CacheCommand:
    """`neobench cache`: what to do with the embedding cache, and where it is."""

    action: str = opt(
        help="info: size and integrity check | clear: delete it",
        positional=True,
        choices=("info", "clear"),
    )
    cache_dir: str | None = opt(
        None, "cache folder (default: $NEOBENCH_CACHE or ~/.cache/neobench)"
    )


@dataclass(kw_only=True)
class StudyRunCommand:
    """`neobench study run`: which study, where its jobs run, whether to run them at all."""

    file: str = opt(help="study file (YAML), e.g. studies/tiny.yaml", positional=True)
    launcher: str = opt("local", launcher_help(), choices=tuple(LAUNCHERS))
    output: str | None = opt(None, "output root (default: the study file's output)")
    dry_run: bool = opt(False, "print the plan (jobs, resources, dependencies, done) and stop")
    wait: bool = opt(False, "slurm: block until every job has ended; exit 1 if one failed")
    canary: bool = opt(
        False,
        "first one short job per model and kind (a few fine-tune steps, the smallest task), "
        "like the real ones; the study only when it passes (default on Slurm above "
        f"{CANARY_GPU_HOURS:g} GPU-hours)",
    )
    no_canary: bool = opt(False, "never send the canary first")
    calibration: str | None = opt(
        None,
        "with --dry-run: the `neobench bench gpu` JSON (or a folder of them) whose rates estimate "
        "each job's GPU-hours (default: the records in <neobench home>/calibration, else the "
        "shipped H100 figures)",
        metavar="FILE",
    )


@dataclass(kw_only=True)
class StudyStatusCommand:
    """`neobench study status`: per model and seed, the state of each stage."""

    file: str = opt(help="study file (YAML)", positional=True)
    output: str | None = like(StudyRunCommand, "output")


@dataclass(kw_only=True)
class StudyTableCommand:
    """`neobench study table`: the study's table, from its results root."""

    file: str = opt(help="study file (YAML)", positional=True)
    output: str | None = like(StudyRunCommand, "output")
    format: str | None = like(TableCommand, "format")
    out: str | None = like(TableCommand, "out")
    html: str | None = opt(
        None,
        "where the HTML page goes (default: --out's name as .html, else table.html in "
        "the study's output)",
    )
    glue: bool = opt(
        False,
        "the GLUE table of the study's glue section (`table --glue`; the only table of a "
        "study with eval: none)",
    )


@dataclass(kw_only=True)
class GlueCommand:
    """`neobench glue`: one model on GLUE under the paper's protocol (docs: neobench/glue)."""

    model: str = opt(help="hub id, HF model folder, or SentenceTransformer folder")
    tasks: list[str] = opt(
        help="comma-separated GLUE tasks: rte,mrpc,stsb,cola,sst2,wnli,qnli,qqp,mnli", csv=True
    )
    output: str = opt(help="results root; runs go to <output>/glue/<model>/<revision>/")
    grid: str = opt("small", "a grid of the recipe (paper, paper-table6, small) or a YAML file")
    seeds: list[str] | None = opt(None, "comma-separated seeds (default: 0)", csv=True)
    set: list[str] = opt(
        [], "recipe override key=value (repeatable), e.g. --set epochs=3", metavar="KEY=VALUE"
    )
    recipe: str = opt("neobert-glue", "GLUE recipe name or YAML file")
    data_dir: str | None = opt(
        None, "offline folder laid out like nyu-mll/glue (or a mirror holding it); default: the hub"
    )
    model_name: str | None = opt(
        None, "name runs are stored under (default: hub id or local/<folder>)"
    )
    device: str = opt("auto", "auto | cpu | cuda | cuda:N")
    trust_remote_code: bool = opt(False, "run the backbone's own code from its repository")
    point: str | None = opt(
        None,
        "run only this point of the grid, by its folder name "
        "(batch_size=16,learning_rate=2e-05,weight_decay=0.01): a study's job",
    )
    select_on: str | None = opt(
        None,
        "where checkpoints and grid points are chosen: heldout (a slice of the training split, "
        "the recipe's default) | validation (the paper's way: chosen and reported on validation)",
        choices=("heldout", "validation"),
    )
    json: str | None = opt(None, "also write the runs, selection and reported scores as JSON")
    dry_run: bool = opt(
        False, "count the runs (and those already complete) and their GPU-hours, run nothing"
    )
    calibration: str | None = opt(
        None,
        "--dry-run's GPU-hours from this `neobench bench gpu --json` record of the card (default: "
        "the known place, else the shipped H100 figures)",
    )
