"""The one source of defaults: typed configs of the commands and the shape of a recipe.

Each field carries its default and a short doc; the command line is built from these fields
(neobench/cli/flags.py), YAML recipes and key=value overrides only override. The numbers of the
standard protocol (max length, instruction profile) live in the standard recipe file alone;
everything here that depends on them reads them from there (`standard()`).
"""

from __future__ import annotations

import functools
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

DEFAULT_BENCHMARK = "MTEB(eng, v1)"
# The recipe whose evaluation settings define the standard conditions (docs/recipe.md).
STANDARD_RECIPE = "neobert-mteb-2k"
# Padded tokens per forward batch when --token-budget is not given: small enough for CPU
# caches, large enough to fill a GPU (docs/performance.md).
TOKEN_BUDGET = {"cpu": 2_048, "cuda": 32_768}
# Bootstrap defaults (neobench/report/bootstrap.py): resamples of each task's units, their seed, and the
# level of the intervals (95%) and of "significant".
RESAMPLES = 1_000
BOOTSTRAP_SEED = 0
ALPHA = 0.05
# Texts per mteb data-loader batch (and per stock encode call in `bench`); neobench's encoder
# regroups them into token-budget batches, so this barely matters for speed.
BATCH_SIZE = 32
DTYPE_NAMES = ("float32", "float16", "bfloat16")  # autocast dtypes (float32: none)
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
DTYPE_CHOICES = ("auto", *DTYPE_NAMES, *DTYPE_ALIASES)
UNPADDED_CHOICES = ("auto", "on", "off")


def opt(default: Any = MISSING, help: str = "", **cli: Any) -> Any:
    """A config field: its default, the one-line doc that is also the flag's help, and optional
    command-line details (``metavar``, ``choices``, ``positional``, ``flag``, ``csv``)."""
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


def _standard_instructions() -> str:
    return standard().instructions


def _standard_length() -> int:
    return standard().max_seq_length


# ---------------------------------------------------------------------------------------------
# Commands


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
        default_factory=_standard_instructions,
        metadata={"help": "instruction profile: paper | authors-code | none | FILE.yaml"},
    )
    results: str = opt(".", "results root, an mteb ResultCache path")
    batch_size: int = opt(
        BATCH_SIZE, "texts per mteb data-loader batch; forward batches follow --token-budget"
    )
    max_seq_length: int | str = field(
        default_factory=_standard_length,
        metadata={"help": "tokens, or 'model' to keep the folder's own"},
    )
    shard: str = opt("1/1", "K/N: run the K-th of N disjoint task shards")
    cache_dir: str | None = opt(
        None, "embedding cache folder (default: $NEOBENCH_CACHE or ~/.cache/neobench)"
    )
    no_cache: bool = opt(False, "encode everything, store nothing")
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


def like(cls: type, name: str, help: str | None = None) -> Any:
    """A field with the default of ``cls``'s field ``name``: one default for two commands."""
    original = next(f for f in fields(cls) if f.name == name)
    meta = {**original.metadata, **({"help": help} if help else {})}
    if original.default_factory is not MISSING:
        return field(default_factory=original.default_factory, metadata=meta)
    return field(default=original.default, metadata=meta)


TABLE_FORMATS = ("rich", "md", "csv", "latex")
LISTINGS = ("tasks", "profiles", "recipes", "keys", "datasets")


@dataclass(kw_only=True)
class TableCommand:
    """`neobench table`: which results, which rows, which output."""

    results: list[str] = opt(
        ["."], "results root given to neobench eval; repeat to combine several"
    )
    models: list[str] | None = opt(
        None, "comma-separated model names or row labels (default: all)", csv=True
    )
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose tasks make the columns")
    format: str | None = opt(
        None,
        "output format: rich | md | csv | latex (default: rich, or from the --out suffix)",
        choices=TABLE_FORMATS,
    )
    out: str | None = opt(None, "write the table to this file (.md, .csv, .tex)")
    reference: str | None = opt(None, "add published rows: paper (NeoBERT Table 4)")
    per_task: bool = opt(False, "one column per task")
    plot: str | None = opt(
        None,
        "also write a PNG forest plot: a panel per type (or task) and Avg., each row a point "
        "with its 95% interval (--ci), paper rows as grey diamonds",
    )
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


@dataclass(kw_only=True)
class CompareCommand:
    """`neobench compare`: paired differences against a baseline, per task and on average."""

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
    out: str | None = opt(None, "write the comparison to this file (.md, .csv or .json)")
    zero_shot_only: bool = opt(
        False, "compare only on the tasks no compared model trained on (drops in-domain tasks)"
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
class BenchEncodeCommand:
    """`neobench bench encode`: which texts, which model, which encoder settings."""

    model: str | None = opt(None, "model (default: the packaged all-MiniLM-L6-v2)")
    tasks: list[str] = opt(
        ["SciFact", "STSBenchmark"], "comma-separated tasks whose texts are encoded", csv=True
    )
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark the tasks belong to")
    data_dir: str | None = like(EvalConfig, "data_dir")
    max_texts: int = opt(4000, "texts encoded in all, an equal share from each task")
    device: str = like(EvalConfig, "device")
    batch_size: int = like(EvalConfig, "batch_size", "stock encode's batch size")
    max_seq_length: int | str = like(EvalConfig, "max_seq_length")
    token_budget: int | None = like(EvalConfig, "token_budget")
    dtype: str = like(EvalConfig, "dtype")
    unpadded: str = like(EvalConfig, "unpadded")


HOST_BENCH_TASKS = [
    "SciFact",
    "ArguAna",
    "TwentyNewsgroupsClustering",
    "STSBenchmark",
    "Banking77Classification",
]


@dataclass(kw_only=True)
class BenchHostCommand:
    """`neobench bench host`: the eval path with a null forward pass, per stage."""

    model: str | None = opt(
        None, "model whose tokenizer and settings are used (default: the packaged MiniLM)"
    )
    tasks: list[str] = opt(HOST_BENCH_TASKS, "comma-separated tasks evaluated", csv=True)
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark the tasks belong to")
    data_dir: str | None = like(EvalConfig, "data_dir")
    cache: list[str] = opt(
        ["off", "cold", "warm"],
        "embedding cache modes: off | cold (empty) | warm (filled by cold)",
        csv=True,
    )
    device: str = like(EvalConfig, "device")
    instructions: str = like(EvalConfig, "instructions")
    max_seq_length: int | str = like(EvalConfig, "max_seq_length")
    stock: bool = opt(
        False, "also run the tasks through stock mteb.evaluate + SentenceTransformer.encode"
    )
    json: str | None = opt(None, "also write the figures to this JSON file", metavar="FILE")


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


LAUNCHERS = ("local", "slurm")


@dataclass(kw_only=True)
class StudyRunCommand:
    """`neobench study run`: which study, where its jobs run, whether to run them at all."""

    file: str = opt(help="study file (YAML), e.g. studies/tiny.yaml", positional=True)
    launcher: str = opt(
        "local",
        "where the jobs run: local (one after another, on this machine) | slurm (submitted "
        "through submitit, with afterok dependencies)",
        choices=LAUNCHERS,
    )
    output: str | None = opt(None, "output root (default: the study file's output)")
    dry_run: bool = opt(False, "print the plan (jobs, resources, dependencies, done) and stop")
    wait: bool = opt(False, "slurm: block until every job has ended; exit 1 if one failed")


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


def field_docs(cls: type) -> dict[str, str]:
    """Each field's one-line doc (for listings and error messages)."""
    return {f.name: f.metadata.get("help", "") for f in fields(cls)}


# ---------------------------------------------------------------------------------------------
# The recipe: which keys exist, their types, and what range each accepts. The values themselves
# live in neobench/protocol/recipes/*.yaml, each with its source (paper | authors-code | neobench).


@dataclass(frozen=True)
class Range:
    """The values a numeric recipe key accepts; callable as the check, printed in messages."""

    low: float
    high: float | None = None  # excluded
    low_excluded: bool = False

    def __call__(self, v: float) -> bool:
        if v < self.low or (self.low_excluded and v == self.low):
            return False
        return self.high is None or v < self.high

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_excluded else '>='} {self.low:g}"
        return f"in [{self.low:g}, {self.high:g})"


_positive = Range(0, low_excluded=True)
_non_negative = Range(0)
_fraction = Range(0, 1)  # 0 <= v < 1


def value(help: str, valid: Any = None, *, hashed: bool = True, default: Any = MISSING) -> Any:
    """A recipe key: its doc, an optional range check, and whether it enters the recipe hash."""
    meta = {"help": help, "valid": valid, "hashed": hashed}
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class RecipeValues:
    """Every value of a fine-tuning recipe. A YAML recipe must give each key without a default;
    `Literal` types are the values this neobench version implements (one, for some keys)."""

    datasets: str | list[str] = value(
        "manifest keys to train on, or 'all' (every row of the manifest)"
    )
    max_steps: int = value("optimisation steps", _positive)
    batch_size: int = value(
        "global batch: queries per step, split evenly across devices", _positive
    )
    max_hard_negatives: int = value("hard negatives per query, at most", _non_negative)
    sampling_alpha: float = value("dataset drawn with probability size^alpha", _non_negative)
    temperature: float = value("InfoNCE temperature (loss scale = 1 / temperature)", _positive)
    similarity: Literal["cosine"] = value("similarity of query and candidate embeddings")
    loss_direction: Literal["query_to_doc"] = value("which side's candidates the loss ranks")
    loss_reduction: Literal["mean"] = value("how per-query losses are combined")
    pooling: Literal["mean"] = value("token embeddings -> text embedding")
    learning_rate: float = value("peak learning rate (AdamW)", _positive)
    adam_beta1: float = value("AdamW beta1", _fraction)
    adam_beta2: float = value("AdamW beta2", _fraction)
    adam_epsilon: float = value("AdamW epsilon", _positive)
    weight_decay: float = value("AdamW weight decay", _non_negative)
    max_grad_norm: float = value("gradient clipping threshold", _positive)
    lr_schedule: Literal["linear"] = value("learning-rate schedule after warm-up")
    warmup_ratio: float = value("share of max_steps spent warming up", _fraction)
    max_seq_length: int = value("tokens per text, training and evaluation", Range(8))
    instructions: str = value("training instruction profile (instructions/train/), or none")
    eval_instructions: str = value("evaluation profile whose prompts the output model carries")
    instruction_separator: str = value("text between an instruction and the query")
    dropout: float = value("dropout during fine-tuning (0 turns it off)", _fraction)
    mixed_precision: str = value("bf16 = bfloat16 autocast on CUDA; anything else runs fp32")
    gradcache_mini_batch: int = value(
        "0 = plain loss; N > 0 = GradCache chunks of N texts", _non_negative
    )
    seed: int = value("seed of the sampler, the data order and initialisation", hashed=False)
    checkpoint_every: int = value("steps between checkpoints", _positive, hashed=False)
    # Recipe files written before this key existed: a completed run drops its checkpoints.
    keep_checkpoints: bool = value(
        "keep the checkpoints of a completed run", hashed=False, default=False
    )


NOT_HASHED = frozenset(f.name for f in fields(RecipeValues) if not f.metadata["hashed"])
