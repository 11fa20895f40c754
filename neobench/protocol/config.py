"""The one source of defaults: typed configs of the commands, each field with its default and doc
(the command line is built from them: cli/flags.py). The standard conditions' numbers live in the
standard recipe file alone (`standard()`).
"""

from __future__ import annotations

import functools
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from neobench.protocol.cache_policy import CACHE_POLICIES, DEFAULT_POLICY

# Bounds the recipe's seed key, beside which it is defined; every seed flag is checked against it.
from neobench.protocol.recipe_values import SEED_RANGE as SEED_RANGE

DEFAULT_BENCHMARK = "MTEB(eng, v1)"
# The format of `neobench bench gpu`'s JSON record, which a study's estimate also reads.
BENCH_GPU_SCHEMA = "neobench-bench-gpu/1"
# The recipe whose evaluation settings define the standard conditions (docs/recipe.md).
STANDARD_RECIPE = "neobert-mteb-2k"
# Padded tokens per forward batch when --token-budget is not given: small enough for CPU
# caches, large enough to fill a GPU (docs/performance.md).
TOKEN_BUDGET = {"cpu": 2_048, "cuda": 32_768}
# Tokenizer processes: auto is one per core this process may use (docs/performance.md).
TOKENIZE_WORKERS = "auto"
# Bootstrap defaults (report/bootstrap.py): resamples of each task's units, their seed, the level
# of the intervals (95%) and of "significant"; below MIN_RESAMPLES the numbers mean nothing.
RESAMPLES = 1_000
MIN_RESAMPLES = 100
BOOTSTRAP_SEED = 0
ALPHA = 0.05
# The seeds planner (`neobench plan`): the power a plan asks for, and the seeds it plans with.
POWER = 0.8
PLAN_SEEDS = 3
# Texts per mteb data-loader batch; the encoder regroups them by token budget (speed: no matter).
BATCH_SIZE = 32
DTYPE_NAMES = ("float32", "float16", "bfloat16")  # autocast dtypes (float32: none)
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
DTYPE_CHOICES = ("auto", *DTYPE_NAMES, *DTYPE_ALIASES)
UNPADDED_CHOICES = ("auto", "on", "off")
# The share of a CUDA device's memory a fine-tune's steps plan to use when --memory-budget is not
# given: the rest covers what torch's allocator reserves beyond what it hands out (fragmentation),
# the CUDA context and cuBLAS's workspaces, none of which torch.cuda.max_memory_allocated counts
# (docs/recipe.md, "Memory: the budget and GradCache chunks").
MEMORY_SHARE = 0.9
# How `finetune`'s training forwards meet padding (train/packing.py): real tokens only, or padded.
PADDING_CHOICES = ("packed", "padded")
PADDING_DEFAULT = "packed"
# The experiment trackers `finetune --report-to` hands to the stock trainer (transformers'
# integrations of the same names): name -> the package it needs, named when it is missing.
TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
REPORT_TO_CHOICES = ("none", *TRACKERS)


def opt(default: Any = MISSING, help: str = "", **cli: Any) -> Any:
    """A config field: its default, the one-line doc that is also the flag's help, and optional
    command-line details (``metavar``, ``choices``, ``positional``, ``flag``, ``csv``, ``after``:
    the field whose flag it follows)."""
    meta = {"help": help, **cli}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def default_token_budget(device: str) -> int:
    return TOKEN_BUDGET["cuda" if device.startswith("cuda") else "cpu"]


@dataclass(frozen=True)
class Standard:
    """The evaluation conditions under which results count as standard (mteb's plain folder)."""

    recipe: str
    instructions: str  # evaluation instruction profile
    max_seq_length: int


@functools.cache
def standard() -> Standard:
    """Derived from the standard recipe, so a change to it moves every default with it."""
    from neobench.protocol.recipe import load_recipe

    values = load_recipe(STANDARD_RECIPE).values
    return Standard(STANDARD_RECIPE, values.eval_instructions, values.max_seq_length)


@dataclass(kw_only=True)
class ModelInputs:
    """What `eval` and `finetune` share: the model, the data source, the device."""

    model: str = opt(help="hub id, HF model folder, or SentenceTransformer folder")
    data_dir: str | None = opt(
        None, "offline mirror <dir>/<hf repo id>/ (default: $NEOBENCH_DATA_DIR, else the hub)"
    )
    device: str = opt("auto", "auto | cpu | cuda | cuda:N")
    trust_remote_code: bool = opt(
        False, "allow model code from the model repository (off by default)"
    )
    attn_implementation: str = opt(
        "auto",
        "auto (the fastest the backbone supports: flash_attention_2 on CUDA in half precision, "
        "else sdpa, else eager) | eager | sdpa | flash_attention_2 | flex_attention",
    )


@dataclass(kw_only=True)
class EvalConfig(ModelInputs):
    """Inputs of one evaluation (`neobench eval`)."""

    model_name: str | None = opt(
        None, "name under which results are stored (default: hub id or local/<folder>)"
    )
    revision: str | None = opt(
        None, "hub revision to load (default: the branch head, recorded as its commit)"
    )
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark")
    tasks: list[str] | None = opt(None, "comma-separated task names of the benchmark", csv=True)
    types: list[str] | None = opt(None, "comma-separated task types, e.g. STS,Retrieval", csv=True)
    instructions: str = field(
        default_factory=lambda: standard().instructions,
        metadata={"help": "instruction profile: paper | authors-code | none | FILE.yaml"},
    )
    results: str = opt(".", "results root, an mteb ResultCache path")
    sweep: str | None = opt(
        None,
        "a study sweep's selection record (OUTPUT/sweeps/<model>.json, written by `neobench "
        "study run`): the run card records the sweep and the point chosen, and the row's recipe "
        "condition becomes that sweep",
        metavar="FILE",
    )
    batch_size: int = opt(
        BATCH_SIZE, "texts per mteb data-loader batch; forward batches follow --token-budget"
    )
    max_seq_length: int | str = field(
        default_factory=lambda: standard().max_seq_length,
        metadata={"help": "tokens, or 'model' to keep the folder's own"},
    )
    shard: str = opt("1/1", "K/N: run the K-th of N disjoint task shards")
    cache_dir: str | None = opt(
        None, "embedding cache folder (default: $NEOBENCH_CACHE or ~/.cache/neobench)"
    )
    no_cache: bool = opt(False, "encode everything, store nothing (= --cache-policy off)")
    cache_policy: str = opt(
        DEFAULT_POLICY,
        "what the embedding cache stores: reusable (small tasks, and texts a later task of "
        "the run asks for again) | all | off (reads nothing either, = --no-cache)",
        choices=CACHE_POLICIES,
    )
    cache_max_gb: float | None = opt(
        None,
        "cap on the embedding cache's database (GB = 1e9 bytes); the least recently used "
        "vectors go first (default: no cap)",
        metavar="GB",
    )
    no_predictions: bool = opt(
        False,
        "save no per-item units beside the task results (predictions/<Task>.units.json, what "
        "confidence intervals and paired tests resample)",
    )
    token_budget: int | None = opt(
        None,
        f"padded tokens per forward batch (default {TOKEN_BUDGET['cpu']} on CPU, "
        f"{TOKEN_BUDGET['cuda']} on CUDA)",
    )
    tokenize_workers: int | str = opt(
        TOKENIZE_WORKERS,
        "processes that tokenise: auto (one per core available) | N (1: a thread of this "
        "process); same tokens either way",
    )
    dtype: str = opt(
        "auto",
        "auto (float16 autocast on CUDA, float32 elsewhere) | float32 | float16 | bfloat16",
        choices=DTYPE_CHOICES,
    )
    unpadded: str = opt(
        "auto",
        "variable-length attention on real tokens only: auto (on CUDA) | on | off",
        choices=UNPADDED_CHOICES,
    )


@dataclass(kw_only=True)
class FinetuneConfig(ModelInputs):
    """Inputs of one fine-tuning run (`neobench finetune`); the recipe holds the training values."""

    output: str = opt(help="new folder for the fine-tuned SentenceTransformer")
    recipe: str = opt(STANDARD_RECIPE, "recipe name or YAML file")
    overrides: list[str] = opt(
        [], "recipe overrides, e.g. max_steps=40", positional=True, metavar="key=value"
    )
    seed: int | None = opt(None, "overrides the recipe's seed")
    seeds: list[str] | None = opt(
        None,
        "comma-separated seeds, e.g. 0,1,2: the recipe once per seed, into <output>-seed<N> "
        "(instead of --seed); evaluated, the seeds form one table row",
        csv=True,
        metavar="N,N,...",
    )
    resume: bool = opt(False, "continue from the last checkpoint in --output")
    model_name: str | None = opt(
        None, "name recorded for the fine-tuned model (default: neobench/<output folder>)"
    )
    report_to: str = opt(
        "none",
        "experiment tracker the trainer logs to, with the recipe and run card as the run's "
        "config: none | tensorboard (events in <output>/runs) | wandb (offline unless "
        "WANDB_MODE is set) | trackio; not part of the recipe, recorded in the run card",
        choices=REPORT_TO_CHOICES,
    )
    padding: str = opt(
        PADDING_DEFAULT,
        "the training forwards: packed (each column's real tokens only, variable-length "
        "attention; a backbone that cannot pack runs padded) | padded (each column padded to "
        "its longest text); the same losses either way, so not part of the recipe: the run "
        "card records which ran and why",
        choices=PADDING_CHOICES,
    )
    memory_budget: float | None = opt(
        None,
        "GiB a training step may use per device: a step whose estimate is above it (or that "
        "runs out of memory) runs its same global batch in GradCache chunks, the same losses, "
        "so not part of the recipe; the run card records the chunks and why (default: on CUDA "
        f"{MEMORY_SHARE:.0%} of the device's memory; on the CPU none, nothing chunked)",
        metavar="GIB",
    )
    dry_run: bool = opt(
        False,
        "print each dataset's heaviest step, its estimated peak memory per device (and the "
        "chunks a step over the budget will run in) and the GPU-hours, then stop: nothing is "
        "trained (the data is read only to count its texts' tokens)",
    )


def like(cls: type, name: str, help: str | None = None) -> Any:
    """A field with the default of ``cls``'s field ``name``: one default for two commands."""
    original = next(f for f in fields(cls) if f.name == name)
    meta = {**original.metadata, **({"help": help} if help else {})}
    if original.default_factory is not MISSING:
        return field(default_factory=original.default_factory, metadata=meta)
    return field(default=original.default, metadata=meta)


@dataclass(kw_only=True)
class TableOptions:
    """`neobench table`'s rows and their resampling: the keywords of report's leaderboard()."""

    results: list[str] = opt(
        ["."], "results root given to neobench eval; repeat to combine several"
    )
    models: list[str] | None = opt(
        None, "comma-separated model names or row labels (default: all)", csv=True
    )
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose tasks make the columns")
    reference: str | None = opt(None, "add published rows: paper (NeoBERT Table 4)")
    per_task: bool = opt(False, "one column per task")
    strict: bool = opt(False, "refuse rows produced under different conditions")
    ci: bool = opt(False, "show each cell's 95% bootstrap interval (needs per-item predictions)")
    baseline: str | None = opt(
        None, "mark cells significantly above / below this model's row (paired bootstrap, Holm)"
    )
    resamples: int = opt(RESAMPLES, "bootstrap resamples of each task's units (--ci, --baseline)")
    seed: int = opt(BOOTSTRAP_SEED, "seed of the resampling: same inputs and seed, same output")
    over: str = opt(
        "items",
        "what type columns and Avg. resample: items (each task's units, tasks fixed) | tasks",
        choices=("items", "tasks"),
    )
    zero_shot_only: bool = opt(
        False, "average only over the tasks no row trained on (drops in-domain tasks)"
    )
    ranks: bool = opt(
        False,
        "rank the rows on Avg. with 95% intervals and letter groups (paired tests between every "
        "two rows, Holm)",
    )
    per_type: bool = opt(False, "with --ranks: rank the rows on each task type too")


@dataclass(kw_only=True)
class CompareOptions:
    """`neobench compare`'s inputs: the keywords of report's compare()."""

    results: list[str] = opt(
        ["."], "results root given to neobench eval; repeat to combine several"
    )
    baseline: str = opt(help="model name or row label every other model is compared with")
    models: list[str] | None = opt(
        None, "comma-separated models to compare (default: every other model found)", csv=True
    )
    tasks: list[str] | None = opt(None, "comma-separated subset of the benchmark's tasks", csv=True)
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark the tasks belong to")
    resamples: int = opt(RESAMPLES, "bootstrap resamples of each task's units")
    seed: int = opt(BOOTSTRAP_SEED, "seed of the resampling: same inputs and seed, same output")
    zero_shot_only: bool = opt(
        False, "compare only on the tasks no compared model trained on (drops in-domain tasks)"
    )


@dataclass(kw_only=True)
class PlanOptions:
    """`neobench plan`'s pilot and question: the keywords of report's plan_seeds()."""

    results: list[str] = opt(["."], "results root of the pilot; repeat to combine several")
    models: list[str] | None = opt(
        None, "comma-separated rows of the pilot (default: every run found)", csv=True
    )
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose tasks make the columns")
    delta: float | None = opt(
        None, "a difference (points x100) to detect: the power and the seeds it needs"
    )
    seeds: int = opt(PLAN_SEEDS, "seeds per backbone the detectable difference is computed for")
    resamples: int = opt(RESAMPLES, "bootstrap resamples of each task's units")
    seed: int = opt(BOOTSTRAP_SEED, "seed of the resampling: same inputs and seed, same output")


@dataclass(kw_only=True)
class OverlapOptions:
    """`neobench overlap`'s manifest, tasks and runs: the keywords of report's overlap_report()."""

    manifest: str = opt(help="dataset manifest name or file whose training data is compared")
    tasks: list[str] | None = opt(None, "comma-separated subset of the benchmark's tasks", csv=True)
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose tasks are compared")
    data_dir: str | None = opt(
        None, "offline mirror of the tasks' data, as `neobench eval --data-dir` (default: the hub)"
    )
    train_data_dir: str | None = opt(
        None, "where the manifest's rows read their data, as `neobench finetune --data-dir` "
        "(default: --data-dir)",
    )  # fmt: skip
    results: list[str] | None = opt(
        None, "results root of evaluated runs to score without the contaminated units"
    )
    models: list[str] | None = opt(
        None, "comma-separated runs under --results (default: all)", csv=True
    )
    decontaminated: bool = opt(
        False, "score each run on the test units that do not occur in training, with intervals"
    )
    resamples: int = opt(RESAMPLES, "bootstrap resamples of each task's units (--decontaminated)")
    seed: int = opt(BOOTSTRAP_SEED, "seed of the resampling: same inputs and seed, same output")


def options(cfg: Any, cls: type) -> dict[str, Any]:
    """The fields of ``cls`` read from ``cfg`` (a command's config that extends ``cls``)."""
    return {f.name: getattr(cfg, f.name) for f in fields(cls)}


LISTINGS = ("tasks", "profiles", "recipes", "keys", "datasets")  # what `neobench ls` lists


def field_docs(cls: type) -> dict[str, str]:
    """Each field's one-line doc (for listings and error messages)."""
    return {f.name: f.metadata.get("help", "") for f in fields(cls)}
