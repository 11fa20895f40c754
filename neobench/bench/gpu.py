"""`neobench bench gpu`: everything the GPU path claims, measured in one run on one device.

Sections, in order, each with a time budget in which it may start new work (GPU_SECTIONS in
neobench/bench/config.py; the whole stays under 10 minutes on one H100 at --size full):
  train     bf16 fine-tuning steps, neobench's recipe against the stock trainer (gpu_train.py)
  encode    tokens/s and % of the GPU's peak: padded, unpadded, stock encode (gpu_encode.py)
  unpadded  unpadded against padded embeddings, per architecture (from encode's embeddings)
  scores    half-precision main scores on the device against CPU float32 (gpu_checks.py)
  topk      the device's top-k lists against the CPU's exact ones (gpu_checks.py)
A section not asked for is recorded as skipped; a section that raises is recorded as an error and
the others still run (one broken section must not cost the rest of a short GPU lease).

`--size tiny` runs every section on 2-layer shapes and a few texts: the plumbing, on a CPU. The
figures are one JSON record (keys: docs/performance.md) and one Markdown table (gpu_report.py).
"""

from __future__ import annotations

import gc
import logging
import math
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from neobench.bench.config import GPU_SCALES, GPU_SECTIONS, GpuScale
from neobench.bench.encode import default_model, peak_flops
from neobench.bench.gpu_inputs import PACKAGED, SHAPES, BenchTexts, Budget, Section

if TYPE_CHECKING:
    from neobench.bench.config import BenchGpuCommand

logger = logging.getLogger(__name__)

SCHEMA = "neobench-bench-gpu/1"
# Sections that need the models and texts; encode and unpadded run together (one produces the
# embeddings the other compares).
NEED_MODELS = ("train", "encode", "unpadded")


def run_gpu_bench(cmd: BenchGpuCommand) -> dict[str, Any]:
    """Check the settings (every problem at once), run the sections asked for, return the record."""
    from neobench.core import provenance

    device, dtype, data_dir = check(cmd)
    scale = GPU_SCALES[cmd.size]
    start = time.perf_counter()
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "device": describe_device(device),
        "settings": _settings(cmd, device, dtype, data_dir),
        "texts": None,
        "sections": {},
    }
    with tempfile.TemporaryDirectory(prefix="neobench-bench-gpu-") as tmp:
        sections = _run_sections(cmd, scale, device, dtype, data_dir, Path(tmp), record)
    record["sections"] = {name: sections[name] for name in GPU_SECTIONS}
    record["seconds"] = round(time.perf_counter() - start, 2)
    record["environment"] = provenance.environment()
    return record


def check(cmd: BenchGpuCommand) -> tuple[str, str, Path | None]:
    """(device, autocast dtype, mirror folder or None); every bad value is one problem."""
    from neobench.core.errors import NeobenchError, check_choice, collect, unknown
    from neobench.encoder.encode import resolve_dtype
    from neobench.models.load import resolve_device
    from neobench.protocol import mirror
    from neobench.protocol.config import DTYPE_CHOICES, SEED_RANGE

    problems: list[str] = []
    collect(problems, check_choice, "--size", cmd.size, list(GPU_SCALES))
    collect(problems, check_choice, "--dtype", cmd.dtype, DTYPE_CHOICES)
    device = collect(problems, resolve_device, cmd.device)
    data_dir = collect(problems, mirror.resolve_data_dir, cmd.data_dir)
    names = [PACKAGED, *SHAPES["base"]]
    for flag, given, valid in (
        ("--sections", cmd.sections, list(GPU_SECTIONS)),
        ("--models", cmd.models, names),
        ("--score-tasks", cmd.score_tasks, None),
    ):
        if not given:
            problems.append(f"{flag}: the list is empty; name at least one.")
        problems += [unknown(f"{flag} value", v, valid) for v in given if valid and v not in valid]
    low, high = SEED_RANGE
    if not low <= cmd.seed < high:
        problems.append(f"--seed {cmd.seed}: a seed is an integer from {low} to {high - 1}.")
    if "scores" in cmd.sections and cmd.score_tasks:
        from neobench.protocol.config import DEFAULT_BENCHMARK
        from neobench.protocol.tasks import load_benchmark, select_tasks

        collect(problems, select_tasks, load_benchmark(DEFAULT_BENCHMARK), cmd.score_tasks)
    if problems:
        raise NeobenchError(problems)
    return device, resolve_dtype(cmd.dtype, device), data_dir


def describe_device(device: str) -> dict[str, Any]:
    """What ran the sections: the card and its nominal peak, or the CPU's threads."""
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(device)
        memory = torch.cuda.get_device_properties(device).total_memory / 2**30
        return {
            "type": "cuda",
            "name": name,
            "peak_flops": peak_flops(name),
            "memory_gib": round(memory, 1),
            "threads": torch.get_num_threads(),
        }
    return {"type": "cpu", "name": "cpu", "peak_flops": None, "threads": torch.get_num_threads()}


def _settings(cmd: BenchGpuCommand, device: str, dtype: str, data_dir: Path | None) -> dict:
    return {
        "size": cmd.size,
        "device": device,
        "dtype": dtype,
        "models": list(cmd.models),
        "sections": list(cmd.sections),
        "score_tasks": list(cmd.score_tasks),
        "data_dir": str(data_dir) if data_dir else None,
        "seed": cmd.seed,
        "budgets_s": dict(GPU_SECTIONS) if GPU_SCALES[cmd.size].budgeted else None,
        "scale": dict(vars(GPU_SCALES[cmd.size])),
    }


def _run_sections(
    cmd: BenchGpuCommand,
    scale: GpuScale,
    device: str,
    dtype: str,
    data_dir: Path | None,
    folder: Path,
    record: dict[str, Any],
) -> dict[str, dict]:
    """Each section's entry, by name; models and texts prepared once, for those that need them."""
    from neobench.bench import gpu_checks, gpu_encode, gpu_train
    from neobench.bench.gpu_inputs import bench_texts, prepare_models

    wanted = set(cmd.sections)
    if wanted & {"encode", "unpadded"}:
        wanted |= {"encode", "unpadded"}
    out = {name: _entry(_skipped("not in --sections"), name, 0.0, scale) for name in GPU_SECTIONS}
    models, texts = [], BenchTexts([], "none", [])
    if wanted & set(NEED_MODELS):
        models = prepare_models(cmd.models, scale.shapes, folder, cmd.seed)
        texts = bench_texts(data_dir, cmd.score_tasks, scale.texts, cmd.seed)
        record["texts"] = texts.summary(_tokenizer(), scale.max_seq_length)
    work = {
        "train": lambda b: gpu_train.train_section(models, texts.texts, scale, device, b),
        "encode": lambda b: gpu_encode.encode_sections(
            models, texts.texts, scale, device, dtype, b
        ),
        "scores": lambda b: gpu_checks.scores_section(cmd.score_tasks, data_dir, device, dtype, b),
        "topk": lambda b: gpu_checks.topk_section(scale, device, cmd.seed, b),
    }
    for name in (n for n in work if n in wanted):
        start = time.perf_counter()
        found = _guarded(name, work[name], Budget(_budget(name, scale)))
        seconds = time.perf_counter() - start
        if name == "encode":  # (encode, unpadded); the second did no work of its own
            encode, unpadded = found if isinstance(found, tuple) else (found, found)
            out["encode"] = _entry(encode, "encode", seconds, scale)
            out["unpadded"] = _entry(unpadded, "unpadded", 0.0, scale)
        else:
            out[name] = _entry(found, name, seconds, scale)
        _free(device)
    return out


def _guarded(name: str, work: Any, budget: Budget) -> Any:
    """The section's result; an unexpected exception becomes an error entry, logged."""
    from neobench.core.errors import NeobenchError

    try:
        return work(budget)
    except NeobenchError:
        raise  # bad input found late is the command's error, reported as such
    except Exception as error:
        logger.warning("bench gpu: section %s stopped: %s", name, error)
        logger.debug("section %s", name, exc_info=True)
        return _skipped(f"{type(error).__name__}: {str(error).strip()[:300]}", "error")


def _skipped(reason: str, status: str = "skipped") -> Section:
    section = Section()
    section.mark(status, reason)
    return section


def _budget(name: str, scale: GpuScale) -> float:
    return GPU_SECTIONS[name] if scale.budgeted else math.inf


def _entry(section: Section, name: str, seconds: float, scale: GpuScale) -> dict[str, Any]:
    return {
        "status": section.status,
        "reason": section.reason,
        "budget_s": GPU_SECTIONS[name] if scale.budgeted else None,
        "seconds": round(seconds, 2),
        "rows": section.rows,
    }


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model())


def _free(device: str) -> None:
    """Drop the section's models before the next one measures its peak memory."""
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def failed(record: dict[str, Any]) -> list[str]:
    """The sections whose check failed or which stopped with an error."""
    return [n for n, s in record["sections"].items() if s["status"] in ("failed", "error")]
