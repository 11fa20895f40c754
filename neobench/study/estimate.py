"""GPU-hours a study's jobs will use, known before it starts (docs/studies.md, "GPU-hours before
a study starts"): each job's FLOPs at the shapes it runs, over the FLOP/s a calibration (the JSON
of `neobench bench gpu`) measured for that kind of work on one card.
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
from neobench.protocol.config import BENCH_GPU_SCHEMA
from neobench.protocol.tasks import (
    CHARS_PER_TOKEN,
    RECIPE_TEXT_LENGTHS,
    retrieval_lengths,
    task_tokens,
)
from neobench.study.jobs import Job
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
class Calibration:
    source: str  # where the figures come from, as the summary says it
    card: str
    rates: dict[str, list[Rate]]  # job kind (finetune, eval) -> the calibrated models' rates

    def rate(self, kind: str, model_type: str) -> tuple[float, str]:
        """(FLOP/s, why) for a model of ``model_type``: a calibrated model of that type, else the
        median over the calibrated models."""
        found = self.rates[kind]
        same = [r for r in found if r.model_type == model_type]
        if same:
            return same[0].flops_per_s, f"the rate of {same[0].model}'s {same[0].rows}"
        median = statistics.median(r.flops_per_s for r in found)
        names = ", ".join(r.model for r in found)
        return median, f"the median rate of {names}'s {found[0].rows}"


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
    rates = {"finetune": _train_rates(records), "eval": _eval_rates(records)}
    missing = [kind for kind, found in rates.items() if not found]
    if missing:
        raise NeobenchError(
            f"--calibration {source}: no rows to estimate {' and '.join(missing)} jobs from. Run "
            "`neobench bench gpu --sections train,corpus --json FILE` on the card and give FILE."
        )
    return Calibration(source, cards[0], rates)


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
_NUMBERS = ("device.peak_flops", "texts.mean_tokens", "settings.scale.train_length")
_ROW_NUMBERS = ("tokens_per_s", "flops_per_s", "peak_fraction")


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
        if row.get("trainer") == "neobench" and row.get("tokens_per_s")
    ]
    recipe = [(rec, row) for rec, row in rows if row.get("shape") == "recipe"]
    chosen, what = (
        (recipe, "recipe-shape train rows") if recipe else (rows, "short-batch train rows")
    )
    return _rates(chosen, what, TRAIN_FLOPS_FACTOR)


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
class Estimate:
    """A plan's estimates: hours per job key (on one calibrated card), and per model its
    shape's source and rates."""

    calibration: Calibration
    hours: dict[str, float] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)  # model name -> how it was estimated
    unknown: list[str] = field(default_factory=list)  # models without a shape


def estimate_plan(plan: Plan, calibration: Calibration) -> Estimate:
    """Hours of each fine-tune and eval job, on one GPU of the calibrated card."""
    from neobench.protocol.config import standard

    found = Estimate(calibration)
    startup_h = (plan.study.slurm.startup_s if plan.study.slurm else 60) / 3600
    shapes = {model.name: model_shape(model, plan.study.data_dir) for model in plan.models}
    for name, shape in shapes.items():
        if shape.model_type is None:
            found.unknown.append(name)
            found.models[name] = f"not estimated: {shape.where}"
            continue
        _, train_why = calibration.rate("finetune", shape.model_type)
        _, eval_why = calibration.rate("eval", shape.model_type)
        found.models[name] = (
            f"{_weights(shape.params)} weights per token ({shape.where}); fine-tune at "
            f"{train_why}, eval at {eval_why}"
        )
    for job in plan.jobs:
        shape = shapes.get(str(job.model))
        if job.kind not in ("finetune", "eval") or shape is None or shape.model_type is None:
            continue
        if job.kind == "finetune":
            flops = finetune_flops(job, shape)
        else:
            length = int(_flag(job, "--max-seq-length") or standard().max_seq_length)
            flops = eval_flops([plan.tasks[t] for t in job.tasks], shape, length)
        rate, _ = calibration.rate(job.kind, shape.model_type)
        found.hours[job.key] = flops / rate / 3600 + startup_h
    return found


def _weights(count: int) -> str:
    return f"{count / 1e6:,.0f}M" if count >= 10**6 else f"{count:,}"


def finetune_flops(job: Job, shape: Shape) -> float:
    """Training FLOPs of the fine-tune: every step's queries, positives and the recipe's most
    hard negatives, at MS MARCO's lengths (cut at the recipe's max_seq_length)."""
    from neobench.protocol.recipe import apply_overrides, load_recipe, parse_overrides

    recipe = load_recipe(str(_flag(job, "--recipe")))
    overrides = [a for a in job.argv if re.match(r"^[a-z_]+=", a)]
    values = apply_overrides(recipe, parse_overrides(overrides)).values
    passages, queries = retrieval_lengths(RECIPE_TEXT_LENGTHS)
    query = min(queries.mean / CHARS_PER_TOKEN + 2, values.max_seq_length)  # + [CLS], [SEP]
    passage = min(passages.mean / CHARS_PER_TOKEN + 2, values.max_seq_length)
    texts = shape.flops(query) + (1 + values.max_hard_negatives) * shape.flops(passage)
    return TRAIN_FLOPS_FACTOR * values.max_steps * values.batch_size * texts


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
