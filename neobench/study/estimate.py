"""GPU-hours and memory a study's jobs will use, known before it starts (docs/studies.md,
"GPU-hours before a study starts"): each job's FLOPs at the shapes it runs, over the FLOP/s a
calibration (the JSON of `neobench bench gpu`) measured for that kind of work on one card; each
fine-tune's peak memory per device at the recipe's step (models/memory.py), fitted to the peaks
the calibration's train rows measured where it has them, and what the fine-tune does when that
is more than the device holds (train/memory_budget.py).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core.errors import NeobenchError
from neobench.core.home import neobench_home
from neobench.models.flops import (
    BENCH_RELEASED,
    RELEASED,
    TRAIN_FLOPS_FACTOR,
    bench_model_type,
    text_flops,
    weights_per_token,
)
from neobench.protocol.config import BENCH_GPU_SCHEMA, PADDING_DEFAULT
from neobench.protocol.glue import TASKS
from neobench.protocol.tasks import (
    CHARS_PER_TOKEN,
    RECIPE_TEXT_LENGTHS,
    retrieval_lengths,
    task_tokens,
)
from neobench.study.jobs import Job, glue_grid
from neobench.study.kinds import JobKind
from neobench.study.models import ResolvedModel
from neobench.study.plan import Plan

SHIPPED = Path(__file__).with_name("calibration")  # H100 records, as docs/measurements holds them
KNOWN_PLACE = "calibration"  # <neobench home>/calibration/*.json: the user's own records
# A time limit below this many times its job's estimate is warned of: the estimate counts the
# encoder's work at the calibrated rate, not mteb's scoring on the CPU nor a slower node.
MARGIN = 1.5


@dataclass(frozen=True)
class Rate:
    """FLOP/s one calibrated model reached for one kind of work."""

    model: str  # its name in the record
    model_type: str
    flops_per_s: float
    rows: str  # which rows: "recipe-shape train rows", "corpus rows", ...


@dataclass(frozen=True)
class Fit:
    """The memory formula fitted to one calibrated model's measured training peak."""

    model: str  # its name in the record
    model_type: str
    factor: float  # measured activations / the formula's (models/memory.fit_factor)
    shape: str  # the step it was measured at, as the line says it


@dataclass(frozen=True)
class Calibration:
    source: str  # where the figures come from, as the summary says it
    card: str
    rates: dict[JobKind, list[Rate]]  # fine-tune and eval -> the calibrated models' rates
    memory_gib: float | None = None  # the card's memory, as the record says it
    fits: list[Fit] = field(default_factory=list)  # from train rows with a peak

    def fit(self, model_type: str) -> tuple[float, str]:
        """(factor on the formula's activations, why): a calibrated model of that type, else the
        largest of the card's factors (the cautious choice), else the formula (1)."""
        same = [f for f in self.fits if f.model_type == model_type]
        if same:
            one = same[0]
            return one.factor, f"fitted to {one.model}'s peak {one.shape} (x{one.factor:.2f})"
        kin = [f for f in self.fits if _layers_of(f.model_type) == _layers_of(model_type)]
        if kin:  # the same layers (BERT's: RoBERTa, DeBERTa-v2, and types counted as BERT)
            one = kin[0]
            return one.factor, (
                f"fitted to {one.model}'s peak {one.shape}, its layers' kind (x{one.factor:.2f})"
            )
        if self.fits:
            top = max(self.fits, key=lambda f: f.factor)
            return top.factor, (
                f"fitted with the largest of the card's factors, {top.model}'s (x{top.factor:.2f})"
            )
        return 1.0, "the formula (the calibration records no training peak)"

    def rate(self, kind: JobKind, model_type: str) -> tuple[float, str]:
        """(FLOP/s, why) for a model of ``model_type``: a calibrated model of that type, else the
        median over the calibrated models."""
        found = self.rates[kind]
        same = [r for r in found if r.model_type == model_type]
        if same:
            return same[0].flops_per_s, f"the rate of {same[0].model}'s {same[0].rows}"
        median = statistics.median(r.flops_per_s for r in found)
        names = ", ".join(r.model for r in found)
        return median, f"the median rate of {names}'s {found[0].rows}"


def _layers_of(model_type: str) -> str:
    """The layer kind the memory formula counts a model type's layers as (models/memory.py)."""
    return model_type if model_type in ("modernbert", "neobert") else "bert"


def load_calibration(given: str | None) -> Calibration:
    """From ``given`` (a `bench gpu` JSON, or a folder of them), else the known place, else the
    shipped H100 figures."""
    place = neobench_home() / KNOWN_PLACE
    if given:
        path = Path(given).expanduser()
        if not path.exists():
            raise NeobenchError(
                f"--calibration {given}: no such file. Give the JSON `neobench bench gpu --json "
                "FILE` wrote on the cluster's card, or leave it out for the shipped H100 figures."
            )
        files, source = _records_in(path), str(path)
    elif list(place.glob("*.json")):
        files, source = _records_in(place), f"{place} (the known place)"
    else:
        files = _records_in(SHIPPED)
        source = f"the shipped H100 figures (no --calibration given, no record in {place})"
    records = [_read(f) for f in files]
    if not records:
        raise NeobenchError(f"--calibration {source}: the folder holds no JSON record.")
    cards = sorted({str((r.get("device") or {}).get("name")) for r in records})
    if len(cards) > 1:
        raise NeobenchError(
            f"--calibration {source}: records of {len(cards)} cards ({', '.join(cards)}); keep "
            "the records of the card the study's jobs will run on."
        )
    rates = {JobKind.FINETUNE: _train_rates(records), JobKind.EVAL: _eval_rates(records)}
    missing = [kind for kind, found in rates.items() if not found]
    if missing:
        raise NeobenchError(
            f"--calibration {source}: no rows to estimate {' and '.join(missing)} jobs from. Run "
            "`neobench bench gpu --sections train,corpus --json FILE` on the card and give FILE."
        )
    memory = next((r["device"].get("memory_gib") for r in records if r.get("device")), None)
    return Calibration(source, cards[0], rates, memory, _memory_fits(records))


def _records_in(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def _read(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise NeobenchError(f"--calibration {path}: unreadable ({error}).") from None
    if not isinstance(record, dict) or record.get("schema") != BENCH_GPU_SCHEMA:
        raise NeobenchError(
            f"--calibration {path}: not a `neobench bench gpu` JSON (its schema is not "
            f"{BENCH_GPU_SCHEMA})."
        )
    problems = [
        f"--calibration {path}: {where} is {_kind(value)}, not {wanted}. Give the JSON "
        "`neobench bench gpu --json FILE` wrote, unedited."
        for where, value, wanted in _misshapen(record)
    ]
    if problems:
        raise NeobenchError(problems)
    return record


# What the estimate reads of a record, by path: the type each must have where it is present.
_OBJECTS = ("device", "settings", "settings.scale", "texts", "sections")
_NUMBERS = (
    "device.peak_flops", "device.memory_gib", "texts.mean_tokens", "settings.scale.train_length",
    "settings.scale.train_batch", "settings.scale.train_negatives",
)  # fmt: skip
_ROW_NUMBERS = (
    "tokens_per_s", "flops_per_s", "peak_fraction", "peak_memory_mb", "tokens", "steps_timed",
    "queries_per_step", "negatives", "max_length",
)  # fmt: skip


def _misshapen(record: dict) -> list[tuple[str, Any, str]]:
    """(where, value, what it should be) for each field the estimate reads that has another type:
    a record edited by hand or written by another tool must not end in a traceback."""
    found: list[tuple[str, Any, str]] = []
    for where in _OBJECTS:
        value = _at(record, where)
        if value is not None and not isinstance(value, dict):
            found.append((where, value, "an object"))
    for where in _NUMBERS:
        value = _at(record, where)
        if value is not None and not _number(value):
            found.append((where, value, "a number"))
    sections = record.get("sections")
    for name, section in (sections if isinstance(sections, dict) else {}).items():
        if section is not None and not isinstance(section, dict):
            found.append((f"sections.{name}", section, "an object"))
            continue
        rows = (section or {}).get("rows")
        if rows is not None and not isinstance(rows, list):
            found.append((f"sections.{name}.rows", rows, "a list"))
            continue
        for i, row in enumerate(rows or []):
            if not isinstance(row, dict):
                continue  # an error row of a failed measurement: not used
            for key in _ROW_NUMBERS:
                if row.get(key) is not None and not _number(row[key]):
                    found.append((f"sections.{name}.rows[{i}].{key}", row[key], "a number"))
    return found


def _at(record: dict, dotted: str) -> Any:
    value: Any = record
    for key in dotted.split("."):
        if not isinstance(value, dict):
            return None  # its parent is misshapen: reported there
        value = value.get(key)
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    names = {str: "a string", list: "a list", dict: "an object", bool: "a boolean"}
    shown = json.dumps(value)
    shown = shown if len(shown) <= 30 else shown[:27] + "..."
    return f"{names.get(type(value), 'a number')} ({shown})"


def _train_rates(records: list[dict]) -> list[Rate]:
    """Rates of neobench's trainer: the recipe-shape rows where there are some, else the others."""
    rows = [
        (record, row)
        for record in records
        for row in _rows(record, "train")
        if row.get("trainer") == "neobench"
        and row.get("tokens_per_s")
        and row.get("variant", "packed") == "packed"  # the default --padding and budget
    ]
    recipe = [(rec, row) for rec, row in rows if row.get("shape") == "recipe"]
    chosen, what = (
        (recipe, "recipe-shape train rows") if recipe else (rows, "short-batch train rows")
    )
    return _rates(chosen, what, TRAIN_FLOPS_FACTOR)


def _memory_fits(records: list[dict]) -> list[Fit]:
    """The memory formula fitted to each model's training peak: the neobench trainer's rows at
    base shapes, under bf16 autocast on CUDA, with their step's shape known (docs/performance.md,
    "Memory of a training step": how a row's shape is read)."""
    from neobench.models.memory import Precision, fit_factor

    found: dict[str, Fit] = {}
    for record in records:
        scale = (record.get("settings") or {}).get("scale") or {}
        for row in _rows(record, "train"):
            name = str(row.get("model"))
            usable = (
                row.get("trainer") == "neobench" and row.get("peak_memory_mb")
                and row.get("precision") == "bf16 autocast" and scale.get("shapes") == "base"
                and name in BENCH_RELEASED and name not in found
                and not (row.get("memory") or {}).get("chunks")  # a chunked peak is not plain
                and row.get("variant") != "chunked"
            )  # fmt: skip
            shape = _row_step(row, scale) if usable else None
            if shape is None:
                continue
            step, said = shape
            fields = RELEASED[BENCH_RELEASED[name]]
            measured = float(row["peak_memory_mb"]) * 2**20
            factor = fit_factor(fields, step, Precision(True, "sdpa"), measured)
            found[name] = Fit(name, str(fields["model_type"]), factor, said)
    return list(found.values())


def _row_step(row: dict, scale: dict) -> tuple[Any, str] | None:
    """The step a train row measured, per device: its queries, a positive and its hard negatives
    each, padded to the row's max length (the longest text of each column reaches it: the bench's
    texts have MS MARCO's long tail, cut there), or packed (the row's run card says so; rows
    before it: native NeoBERT, which unpads on CUDA) with the row's real tokens per step. Older
    records name the shape only in their settings."""
    from neobench.models.memory import Column, Step

    queries = row.get("queries_per_step") or scale.get("train_batch")
    length = row.get("max_length") or scale.get("train_length")
    negatives = row.get("negatives", scale.get("train_negatives", 0))
    if not (_number(queries) and _number(length) and _number(negatives)):
        return None
    queries, length, columns = int(queries), int(length), 2 + int(negatives)
    said = f"at {queries} queries x {columns} texts, {length} tokens"
    padding = (row.get("padding") or {}).get("mode")
    packed = padding == "packed" or (
        padding is None and bench_model_type(str(row.get("model"))) == "neobert"
    )
    if packed:
        tokens, steps = row.get("tokens"), row.get("steps_timed")
        if not (_number(tokens) and _number(steps) and steps):
            return None
        per_column = float(tokens) / float(steps) / columns
        column = Column(queries, round(per_column), 0, length, packed=True)
        return Step((column,) * columns), said + f" (packed, {tokens / steps:,.0f} real tokens)"
    return Step((Column.padded(queries, length),) * columns), said


def _eval_rates(records: list[dict]) -> list[Rate]:
    """Rates of neobench's eval path: the corpus rows (the whole path on a corpus) where there are
    some, else the encode section's unpadded rows (short texts: the GPU's work only)."""
    corpus = [(rec, row) for rec in records for row in _rows(rec, "corpus")]
    if corpus:
        return _rates(corpus, "corpus rows", 1)
    encode = [
        (rec, row)
        for rec in records
        for row in _rows(rec, "encode")
        if row.get("path") == "unpadded"
    ]
    return _rates(encode, "encode rows, short texts", 1)


def _rows(record: dict, section: str) -> list[dict]:
    """The section's rows that are measurements (dicts), none where it is missing."""
    found = ((record.get("sections") or {}).get(section) or {}).get("rows") or []
    return [row for row in found if isinstance(row, dict)]


def _rates(rows: list[tuple[dict, dict]], what: str, factor: int) -> list[Rate]:
    found: dict[str, Rate] = {}
    for record, row in rows:
        flops = _flops_per_s(record, row, factor)
        model_type = bench_model_type(str(row.get("model")))
        if flops and model_type and row["model"] not in found:
            found[row["model"]] = Rate(row["model"], model_type, flops, what)
    return list(found.values())


def _flops_per_s(record: dict, row: dict, factor: int) -> float | None:
    """A row's FLOP/s: its own figure, else (records written before rows carried one) from the
    share of the card's peak, else from its tokens/s at the texts' mean length (base shapes)."""
    if row.get("flops_per_s"):
        return float(row["flops_per_s"])
    peak = (record.get("device") or {}).get("peak_flops")
    if row.get("peak_fraction") and peak:
        return float(row["peak_fraction"]) * peak
    scale = (record.get("settings") or {}).get("scale") or {}
    if scale.get("shapes") != "base" or row.get("model") not in BENCH_RELEASED:
        return None
    try:
        length = min(float(record["texts"]["mean_tokens"]), float(scale["train_length"]))
        tokens_per_s = float(row["tokens_per_s"])
    except (KeyError, TypeError, ValueError):  # not the figures this needs: the row is not used
        return None
    fields = RELEASED[BENCH_RELEASED[row["model"]]]
    per_token = text_flops(weights_per_token(fields)[0], fields, length) / length
    return tokens_per_s * per_token * factor


# ---------------------------------------------------------------------------- the estimates


@dataclass
class Shape:
    """One study model's arithmetic, or why it is unknown."""

    model_type: str | None = None
    params: int = 0
    config: dict[str, Any] = field(default_factory=dict)  # its config.json's fields
    where: str = ""  # where its config was found, or why it was not

    def flops(self, length: float) -> float:
        return text_flops(self.params, self.config, length)


@dataclass
class FinetuneMemory:
    """A fine-tune's peak memory per device at the recipe's step, dataset by dataset."""

    plans: dict[str, Any]  # dataset key -> step_plan.Plan (peaks fitted to the card)
    budget: Any  # step_plan.Budget, or None where the card's memory is unknown
    how: str  # the formula, fitted or not, and the attention assumed
    lengths: str  # where the datasets' lengths come from

    @property
    def worst(self) -> str:
        """The dataset whose plain step is the heaviest."""
        return max(self.plans, key=lambda key: self.plans[key].plain)

    @property
    def chunk(self) -> int | None:
        """The smallest chunk any dataset's step runs in (None: every step runs plain)."""
        chunks = [p.chunk for p in self.plans.values() if p.chunk is not None]
        return min(chunks) if chunks else None

    @property
    def fits(self) -> bool:
        return all(p.fits for p in self.plans.values())

    @property
    def chunked_share(self) -> float:
        """The share of the datasets whose steps run in chunks."""
        return sum(p.chunk is not None or not p.fits for p in self.plans.values()) / len(self.plans)

    def cell(self) -> str:
        """The listing's column: the heaviest step's peak, and the chunks where it has some."""
        worst = self.plans[self.worst]
        if not self.fits:
            return f"{gib_short(worst.plain)}, does not fit"
        if self.chunk is None:
            return gib_short(worst.plain)
        return f"{gib_short(worst.plain)} > chunks of {self.chunk}"


@dataclass
class Estimate:
    """A plan's estimates: hours per job key (on one calibrated card), per fine-tune job its
    memory, and per model its shape's source and rates."""

    calibration: Calibration
    hours: dict[str, float] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)  # model name -> how it was estimated
    unknown: list[str] = field(default_factory=list)  # models without a shape
    memory: dict[str, FinetuneMemory] = field(default_factory=dict)  # fine-tune job key ->


def _rate_labels(kinds: set[JobKind]) -> list[tuple[JobKind, str]]:
    """The calibrated rates a model's jobs of ``kinds`` are estimated at, and their words: a
    GLUE run trains, at the fine-tune rate."""
    words = {JobKind.FINETUNE: "fine-tune", JobKind.GLUE: "GLUE runs"}
    training = [word for kind, word in words.items() if kind in kinds]
    found = [(JobKind.FINETUNE, " and ".join(training))] if training else []
    return found + ([(JobKind.EVAL, "eval")] if JobKind.EVAL in kinds else [])


def estimate_plan(plan: Plan, calibration: Calibration) -> Estimate:
    """Hours of each fine-tune, eval and GLUE job, on one GPU of the calibrated card."""
    from neobench.protocol.config import standard

    found = Estimate(calibration)
    startup_h = (plan.study.slurm.startup_s if plan.study.slurm else 60) / 3600
    shapes = {model.name: model_shape(model, plan.study.data_dir) for model in plan.models}
    for name, shape in shapes.items():
        if shape.model_type is None:
            found.unknown.append(name)
            found.models[name] = f"not estimated: {shape.where}"
            continue
        rates = []
        for kind, label in _rate_labels({j.kind for j in plan.jobs if j.model == name}):
            if kind in calibration.rates:
                rates.append(f"{label} at {calibration.rate(kind, shape.model_type)[1]}")
        how = f"{_weights(shape.params)} weights per token ({shape.where})"
        found.models[name] = how + (f"; {', '.join(rates)}" if rates else "")
    models = {model.name: model for model in plan.models}
    memo: dict[tuple, FinetuneMemory] = {}
    _, glue_values = glue_grid(plan.study, [])  # the glue section was checked with the plan
    for job in plan.jobs:
        shape = shapes.get(str(job.model))
        if shape is None or shape.model_type is None:
            continue  # a table: no model, no rate
        if job.kind is JobKind.GLUE and JobKind.FINETUNE in calibration.rates:
            rate, _ = calibration.rate(JobKind.FINETUNE, shape.model_type)  # a training run
            flops = glue_run_flops(TASKS[job.tasks[0]], glue_values[str(job.point)], shape)
            found.hours[job.key] = flops / rate / 3600 + startup_h
            continue
        if job.kind not in calibration.rates:
            continue
        if job.kind is JobKind.FINETUNE:
            flops = finetune_flops(job, shape)
            # The same model, recipe and flags: the same step (seeds and folders aside).
            memo_key = (str(job.model), _memory_argv(job))
            if memo_key not in memo:
                world = job.resources.gpus if job.resources and job.resources.gpus > 1 else 1
                memo[memo_key] = job_memory(
                    job, shape, models[str(job.model)], calibration, plan.study.data_dir, world
                )
            found.memory[job.key] = memo[memo_key]
            flops = chunked_flops(flops, memo[memo_key])
        else:
            length = int(_flag(job, "--max-seq-length") or standard().max_seq_length)
            flops = eval_flops([plan.tasks[t] for t in job.tasks], shape, length)
        rate, _ = calibration.rate(job.kind, shape.model_type)
        found.hours[job.key] = flops / rate / 3600 + startup_h
    return found


# A GradCache step's FLOPs per forward FLOP: a forward without gradients, then the forward
# again with them and the backward (twice a forward); the plain step's is TRAIN_FLOPS_FACTOR.
GRADCACHE_FLOPS_FACTOR = 4
# Flags of a fine-tune job that do not change its step: what `_memory_argv` leaves out.
_PER_RUN_FLAGS = ("--seed", "--output", "--model-name")


def _memory_argv(job: Job) -> tuple[str, ...]:
    kept, skip = [], False
    for arg in job.argv:
        if skip:
            skip = False
        elif arg in _PER_RUN_FLAGS:
            skip = True
        else:
            kept.append(arg)
    return tuple(kept)


def job_memory(
    job: Job,
    shape: Shape,
    model: ResolvedModel,
    calibration: Calibration,
    data_dir: str | None,
    world: int,
) -> FinetuneMemory:
    """A study fine-tune's memory on the calibrated card: its recipe (with the job's overrides),
    the model's shape and attention, the datasets' lengths kept in the mirror's lock (none
    counted here: a dry run of a whole study stays quick)."""
    from neobench.protocol.recipe import apply_overrides, load_recipe, parse_overrides

    recipe = load_recipe(str(_flag(job, "--recipe")))
    overrides = [a for a in job.argv if re.match(r"^[a-z_]+=", a)]
    recipe = apply_overrides(recipe, parse_overrides(overrides))
    implementation = _flag(job, "--attn-implementation") or "auto"
    padding = _flag(job, "--padding") or PADDING_DEFAULT
    given = _flag(job, "--memory-budget")
    budget = _card_budget(calibration, float(given) if given else None)
    mirror_dir = Path(data_dir) if data_dir else None
    return recipe_memory(
        recipe, shape, implementation, model.trust_remote_code, budget, calibration,
        mirror_dir, world, measure=False, padding=padding,
    )  # fmt: skip


def _card_budget(calibration: Calibration | None, given: float | None) -> Any:
    """--memory-budget, else the fine-tune's default on the card (MEMORY_SHARE of its memory)."""
    from neobench.models.memory import GIB, MEMORY_SHARE
    from neobench.train.step_plan import Budget

    if given is not None:
        return Budget(given * GIB, f"--memory-budget {given:g}")
    if calibration is None or not calibration.memory_gib:
        return None
    total = float(calibration.memory_gib)
    return Budget(MEMORY_SHARE * total * GIB, f"{MEMORY_SHARE:.0%} of the card's {total:g} GiB")


def recipe_memory(
    recipe: Any,
    shape: Shape,
    implementation: str,
    remote_code: bool,
    budget: Any,
    calibration: Calibration | None,
    data_dir: Path | None,
    world: int,
    measure: bool,
    cuda: bool = True,
    padding: str = PADDING_DEFAULT,
) -> FinetuneMemory:
    """Each dataset's heaviest step at the recipe's shape, on CUDA in the recipe's precision (or
    the CPU's float32), packed where ``padding`` asks it and the backbone packs (PACKED_TYPES;
    remote code is planned padded: its classes are not known before they load): its peak
    (fitted to the card where the calibration has a training peak) and, over ``budget``, the
    GradCache chunk the fine-tune will run it in."""
    from neobench.models.attention import PACKED_TYPES
    from neobench.models.memory import Precision, attention_kind
    from neobench.protocol import mirror
    from neobench.protocol.instructions import load_train_instructions
    from neobench.protocol.manifest import dataset_keys, declared_negatives, load_manifest
    from neobench.train.step_plan import plan_step, recipe_step

    values = recipe.values
    manifest = load_manifest(recipe.manifest)
    rows = [manifest.rows[k] for k in dataset_keys(manifest, values.datasets)]
    profile = load_train_instructions(values.instructions)
    found = mirror.training_lengths(rows, data_dir, values.max_hard_negatives, measure)
    attention = "eager" if remote_code else attention_kind(shape.config, implementation)
    if cuda and shape.model_type == "neobert" and attention != "eager":
        attention = "varlen"  # native NeoBERT unpads on CUDA (models/neobert.py)
    packed = padding == "packed" and not remote_code and shape.model_type in PACKED_TYPES
    if packed and attention != "eager":
        attention = "varlen"
    precision = Precision(cuda and values.mixed_precision == "bf16", attention)
    fit, fit_why = calibration.fit(str(shape.model_type)) if calibration else (1.0, "the formula")
    plans = {}
    for row in rows:
        lengths, _ = found[row.key]
        negatives = min(values.max_hard_negatives, declared_negatives(row))
        instruction = profile.instructions.get(row.instruction, "")
        instruction += values.instruction_separator if instruction else ""
        step = recipe_step(values, world, lengths, negatives, instruction, packed)
        plans[row.key] = plan_step(shape.config, step, precision, budget, fit)
    assumed = (
        "eager attention assumed (remote code: its attention is not known before it runs)"
        if remote_code
        else f"{attention} attention"
    )
    assumed += ", packed (--padding packed)" if packed else ", padded"
    lengths_said = _lengths_said(found, values, packed)
    return FinetuneMemory(plans, budget, f"{fit_why}; {assumed}", lengths_said)


def _lengths_said(found: dict[str, tuple[Any, str]], values: Any, packed: bool) -> str:
    """Where the lengths come from, as the line says it."""
    from neobench.train.step_plan import PACKED_PERCENTILE

    measured = [k for k, (lengths, _) in found.items() if lengths is not None]
    missing = [k for k, (lengths, _) in found.items() if lengths is None]
    if not missing:
        which = f"texts at its {PACKED_PERCENTILE}" if packed else "longest text"
        return f"each column's {which}, measured ({len(measured)} datasets)"
    many = f"{len(missing)} datasets" if len(missing) > 1 else "its dataset"
    worst = f"every text of {many} at max_seq_length {values.max_seq_length}"
    why = found[missing[0]][1]
    if not measured:
        return f"{worst}, the worst case (no lengths recorded: {why})"
    return f"measured for {len(measured)} datasets; {worst}, the worst case ({why})"


def gib_short(count: float) -> str:
    """Bytes as GiB for a listing cell: whole GiB from 10 up."""
    from neobench.models.memory import GIB

    value = count / GIB
    digits = 0 if value >= 10 else 1 if value >= 1 else 2
    return f"{value:,.{digits}f} GiB"


def _weights(count: int) -> str:
    return f"{count / 1e6:,.0f}M" if count >= 10**6 else f"{count:,}"


def finetune_flops(job: Job, shape: Shape) -> float:
    """Training FLOPs of the fine-tune job (its recipe with the job's overrides)."""
    from neobench.protocol.recipe import apply_overrides, load_recipe, parse_overrides

    recipe = load_recipe(str(_flag(job, "--recipe")))
    overrides = [a for a in job.argv if re.match(r"^[a-z_]+=", a)]
    return recipe_flops(apply_overrides(recipe, parse_overrides(overrides)).values, shape)


def recipe_flops(values: Any, shape: Shape) -> float:
    """Training FLOPs of a fine-tune: every step's queries, positives and the recipe's most
    hard negatives, at MS MARCO's lengths (cut at the recipe's max_seq_length)."""
    passages, queries = retrieval_lengths(RECIPE_TEXT_LENGTHS)
    query = min(queries.mean / CHARS_PER_TOKEN + 2, values.max_seq_length)  # + [CLS], [SEP]
    passage = min(passages.mean / CHARS_PER_TOKEN + 2, values.max_seq_length)
    texts = shape.flops(query) + (1 + values.max_hard_negatives) * shape.flops(passage)
    return TRAIN_FLOPS_FACTOR * values.max_steps * values.batch_size * texts


def chunked_flops(flops: float, memory: FinetuneMemory) -> float:
    """``flops`` with GradCache's second forward on the steps that chunk (counted as datasets)."""
    extra = GRADCACHE_FLOPS_FACTOR / TRAIN_FLOPS_FACTOR - 1
    return flops * (1 + extra * memory.chunked_share)


def eval_flops(tasks: list[Any], shape: Shape, max_length: int) -> float:
    """Forward FLOPs of the tasks' eval splits: mteb's characters as tokens, each task's texts at
    their mean length (cut at ``max_length``)."""
    total = 0.0
    for task in tasks:
        texts, length = task_tokens(task, max_length)
        total += texts * shape.flops(length)
    return total


def _flag(job: Job, flag: str) -> str | None:
    return job.argv[job.argv.index(flag) + 1] if flag in job.argv else None


def model_shape(model: ResolvedModel, data_dir: str | None) -> Shape:
    """The model's config: its file (config: models), its folder, the mirror's copy, the hub's
    local cache; else the released shapes neobench knows; else unknown (said why)."""
    fields, where = _config_fields(model, data_dir)
    if fields is None:
        return Shape(where=where)
    try:
        params, known = weights_per_token(fields)
    except (KeyError, TypeError, ValueError):  # no hidden_size or layers: not an encoder's config
        return Shape(where=f"its config ({where}) gives no hidden_size and num_hidden_layers")
    kind = str(fields["model_type"])
    where += "" if known else f"; {kind}'s layers counted as BERT's"
    return Shape(kind, params, fields, where)


def _config_fields(model: ResolvedModel, data_dir: str | None) -> tuple[dict | None, str]:
    from neobench.models.load import transformer_folder

    candidates: list[tuple[Path, str]] = []
    if model.config_file is not None:
        candidates.append((model.config_file, "its config file"))
    folder = Path(model.path).expanduser()
    if folder.is_dir():
        candidates.append((transformer_folder(folder) / "config.json", "its folder"))
    else:
        if data_dir:
            candidates.append((Path(data_dir) / model.path / "config.json", "the mirror"))
        cached = _hub_cache(model.path)
        if cached:
            candidates.append((cached, "the hub's local cache"))
    for path, where in candidates:
        if path.is_file():
            fields = json.loads(path.read_text(encoding="utf-8"))
            if "model_type" in fields:
                return fields, where
    if model.path in RELEASED:
        return dict(RELEASED[model.path]), "the released shape neobench knows"
    return None, "its config is not on this machine (download the model or give its folder)"


def _hub_cache(repo: str) -> Path | None:
    """config.json of ``repo`` in the hub's local cache, if it was ever downloaded (no network)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo, "config.json")
    except ValueError:  # not a repo id
        return None
    return Path(found) if isinstance(found, str) else None


def hours_text(hours: float) -> str:
    """0.4 h, 3.1 h; minutes under a tenth of an hour."""
    return f"{hours:.1f} h" if hours >= 0.1 else f"{math.ceil(hours * 60)} min"


# ------------------------------------------------------------------- `neobench finetune --dry-run`


@dataclass
class FinetunePlan:
    """A fine-tune config's memory before it runs, on the device it names (finetune_plan)."""

    memory: FinetuneMemory
    card: Calibration | None  # the calibration fitted to the device's card, if any
    where: str  # the device, as the dry run names it
    world: int  # processes
    shape: Shape
    recipe: Any  # the Recipe, with the config's overrides


def finetune_plan(cfg: Any, calibration: str | None = None) -> FinetunePlan:
    """Each dataset's heaviest step for a FinetuneConfig, planned as the fine-tune will run it.
    Nothing is loaded but configs and (to count lengths) the data.

    The device: a visible CUDA device (its memory, and a calibration of that card fits the
    formula); --device cuda where none is visible: the calibration's card; else the CPU, in
    float32, where only --memory-budget sets a budget."""
    import dataclasses

    import torch

    from neobench.protocol import mirror
    from neobench.train.inputs import check_inputs
    from neobench.train.memory_budget import resolve_budget

    wanted_cuda = cfg.device.startswith("cuda") or (
        cfg.device == "auto" and torch.cuda.is_available()
    )
    here = torch.cuda.is_available()
    # Checked as the run would be; a CUDA run prepared where no device is visible, as on the CPU.
    checked = cfg if here or not wanted_cuda else dataclasses.replace(cfg, device="cpu")
    inputs = check_inputs(checked)
    data_dir = mirror.resolve_data_dir(cfg.data_dir)
    model = ResolvedModel(cfg.model, cfg.model, trust_remote_code=cfg.trust_remote_code)
    shape = model_shape(model, str(data_dir) if data_dir else None)
    if shape.model_type is None:
        raise NeobenchError(f"--model {cfg.model}: no memory estimate: {shape.where}.")
    card: Calibration | None = None
    if wanted_cuda:
        card = _calibration_for(torch.cuda.get_device_name(0) if here else None, calibration)
    if wanted_cuda and here:
        budget = resolve_budget(cfg.memory_budget, "cuda")
        where = f"one {torch.cuda.get_device_name(0)} (this machine's)"
    elif wanted_cuda:
        budget = _card_budget(card, cfg.memory_budget)
        where = f"one {card.card} (the calibration's card: no CUDA device is visible here)"
    else:
        budget = resolve_budget(cfg.memory_budget, "cpu")
        where = "the CPU, in float32"
    recipe = inputs.recipe
    found = recipe_memory(
        recipe, shape, cfg.attn_implementation, cfg.trust_remote_code, budget, card,
        data_dir, inputs.world, measure=True, cuda=wanted_cuda, padding=cfg.padding,
    )  # fmt: skip
    return FinetunePlan(found, card, where, inputs.world, shape, recipe)


def finetune_estimate(cfg: Any, calibration: str | None = None) -> tuple[Any, list[str], bool]:
    """What `neobench finetune ... --dry-run` prints: per dataset its heaviest step at the
    recipe's shape, its estimated peak per device and what the fine-tune does with it, then how
    the figures were made, and whether every step fits the budget (at least in chunks)."""
    from neobench.protocol.listing import Listing

    planned = finetune_plan(cfg, calibration)
    found, card, where, shape = planned.memory, planned.card, planned.where, planned.shape
    recipe, world = planned.recipe, planned.world
    rows = []
    for key, plan in found.plans.items():
        columns = plan.step.columns
        lengths = f"{columns[0].longest} / {columns[1].longest}"
        lengths += f" / {columns[2].longest} x {len(columns) - 2}" if len(columns) > 2 else ""
        if not plan.fits:
            then = f"does not fit: one text at a time takes {_gib(plan.chunked)}"
        elif plan.chunk is None:
            then = "plain"
        else:
            then = f"GradCache chunks of {plan.chunk} texts: {_gib(plan.chunked)}"
        texts = f"{columns[0].texts} x {len(columns)}"
        rows.append((key, texts, lengths, _gib(plan.plain), then))
    title = f"{cfg.model} with {recipe.name}: each dataset's heaviest step, per device"
    columns = ("dataset", "texts", "longest (query / positive / negatives)", "peak", "runs")
    listing = Listing(title, columns, rows)
    worst = found.plans[found.worst]
    budget_said = found.budget.text if found.budget else "none (the CPU without --memory-budget)"
    if card is not None:
        rate, why = card.rate(JobKind.FINETUNE, str(shape.model_type))
        hours = chunked_flops(recipe_flops(recipe.values, shape), found) / rate / 3600 / world
        hours_said = (
            f"GPU-hours: {hours_text(hours)} on each of {world} {card.card} at {why}"
            if world > 1
            else f"GPU-hours: {hours_text(hours)} on one {card.card} at {why}"
        )
    else:
        hours_said = "GPU-hours: estimated for a CUDA card only (--device cuda)"
    lines = [
        f"Estimated on {where}: {found.how}.",
        f"Lengths: {found.lengths}.",
        f"Budget: {budget_said}.",
        f"The heaviest step ({found.worst}) peaks at {_gib(worst.plain)} per device"
        + _then(found, worst),
        hours_said
        + (" (GradCache's second forward included)." if found.chunk is not None else "."),
    ]
    return listing, lines, found.fits


def _gib(count: float | None) -> str:
    from neobench.models.memory import gib

    return "-" if count is None else gib(count)


def _then(found: FinetuneMemory, worst: Any) -> str:
    if not found.fits:
        return ": more than the budget, even in chunks of one text."
    if found.budget is None:
        return ": without a budget every step runs the plain loss."
    if found.chunk is None:
        return ", within the budget: every step runs the plain loss."
    share = found.chunked_share
    return (
        f": over the budget, the same global batch runs in GradCache chunks (of {found.chunk} "
        f"texts at the heaviest; {share:.0%} of the datasets' steps chunk)."
    )


def _calibration_for(device_name: str | None, given: str | None) -> Calibration | None:
    """The calibration that fits the formula: ``given``, else the known place or the shipped
    records, when its card is this device (any card when no device is visible)."""
    try:
        found = load_calibration(given)
    except NeobenchError:
        if given:
            raise
        return None
    if device_name is not None and found.card != device_name:
        return None
    return found


# --------------------------------------------------------------------- `neobench glue --dry-run`


@dataclass
class GlueEstimate:
    """GPU-hours of GLUE runs left to run, per task, or why they are unknown."""

    hours: dict[str, float]  # task -> GPU-hours of its runs
    shape: Shape
    rate_why: str = ""
    card: str = ""

    @property
    def total(self) -> float:
        return sum(self.hours.values())

    def lines(self) -> list[str]:
        if not self.hours and self.shape.model_type is None:
            return [f"GPU-hours: unknown, {self.shape.where}."]
        per_task = ", ".join(f"{task} {hours_text(h)}" for task, h in self.hours.items())
        return [
            f"GPU-hours on one {self.card}: {hours_text(self.total)} ({per_task}). An upper "
            "bound on the training (every epoch, as if early stopping never stopped a run) at "
            f"the card's fine-tune rate ({self.rate_why}): small batches (4, 8) run below that "
            "rate, so their points take longer than this says.",
            f"Model arithmetic: {self.shape.where}.",
        ]


def glue_run_flops(task: Any, values: Any, shape: Shape) -> float:
    """FLOPs of one GLUE run at its values: training (every epoch) and the selection split's
    evaluations, each text at the task's mean length (cut at max_seq_length); the validation
    split, predicted once, is left out."""
    from neobench.glue.run import eval_every, fit_rows, heldout_size

    length = min(task.mean_chars / CHARS_PER_TOKEN + 3, values.max_seq_length)  # CLS, 2 SEP
    fit = fit_rows(task.train_rows, values)
    steps = math.ceil(fit / values.batch_size)
    evaluations = values.epochs * steps // eval_every(steps, values)
    selection = heldout_size(task.train_rows, values) if values.select_on == "heldout" else 0
    texts = TRAIN_FLOPS_FACTOR * values.epochs * fit + evaluations * selection
    return texts * shape.flops(length)


def glue_estimate(model: str, runs: list[Any], calibration: str | None = None) -> GlueEstimate:
    """The GPU-hours of ``runs`` (glue.run.RunSpec) of ``model`` (a folder or hub id: its
    config where this machine has it, else the released shapes neobench knows)."""
    shape = model_shape(ResolvedModel(model, model), None)
    if shape.model_type is None:
        return GlueEstimate({}, shape)
    found = load_calibration(calibration)
    rate, why = found.rate(JobKind.FINETUNE, shape.model_type)
    hours: dict[str, float] = {}
    for spec in runs:
        hours[spec.task.name] = (
            hours.get(spec.task.name, 0.0)
            + glue_run_flops(spec.task, spec.values, shape) / rate / 3600
        )
    return GlueEstimate(hours, shape, why, found.card)
