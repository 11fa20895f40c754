"""`bench gpu`, sections scores and topk: the two checks that the fast path gives the numbers
the slow one does.

scores  The packaged all-MiniLM-L6-v2 (real weights: a random network's scores mean nothing)
        evaluated through `neobench eval`'s own path (run_eval: mteb, the adapter, the encoder)
        twice per task: on the device in half-precision autocast, and on the CPU in float32;
        the main scores must agree within SCORE_TOLERANCE. Needs the tasks' data (--data-dir).
topk    Seeded random unit vectors; the k best documents of every query from RunningTopK on
        the device (blocked, merged block by block) against the CPU's exact lists (each query
        block scored against the whole corpus at once, one topk). A query whose document ids
        differ passes when the scores agree at every rank within TIE_TOLERANCE: the lists then
        differ only in the order of (near-)tied documents.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from neobench.bench.config import GpuScale
from neobench.bench.encode import default_model
from neobench.bench.gpu_inputs import Budget, Section
from neobench.encoder.search import exact_float32, top_k

# Main scores are 0-1: 0.001 is 0.1 point on the leaderboard's 0-100 scale.
SCORE_TOLERANCE = 0.001
TIE_TOLERANCE = 1e-5  # cosine: two float32 sums of 384 products in another order differ ~1e-7
REFERENCE_BLOCK = 256  # queries scored against the whole corpus at once by the CPU reference
# The mirror's folders of the default score tasks (what to copy to a machine without it).
SCORE_DATA = "mteb/biosses-sts, mteb/sts16-sts and mteb/scifact"


def scores_section(
    tasks: list[str], data_dir: Path | None, device: str, dtype: str, budget: Budget
) -> Section:
    """Every task's main score on the device in ``dtype`` and on the CPU in float32."""
    section = Section()
    if data_dir is None:
        section.mark(
            "skipped",
            "no --data-dir: the tasks' data is not on this machine. Copy the mirror's "
            f"{SCORE_DATA} (3.2 MB) to it and pass that folder as --data-dir",
        )
        return section
    if not device.startswith("cuda") and dtype == "float32":
        section.mark(
            "not applicable",
            "on a CPU --dtype auto is float32, the reference itself; pass --dtype float16 "
            "(or bfloat16) to compare the CPU's half-precision autocast",
        )
        return section
    with tempfile.TemporaryDirectory(prefix="neobench-bench-gpu-") as tmp:
        for task in tasks:
            if budget.spent(section, task):
                break
            scores = {}
            for where, on, precision in (("device", device, dtype), ("cpu", "cpu", "float32")):
                scores[where] = _main_score(task, data_dir, on, precision, Path(tmp) / where)
            if None in scores.values():
                section.mark("error", f"{task}: the evaluation failed (run `neobench eval` on it)")
                continue
            diff = abs(scores["device"] - scores["cpu"])
            section.rows.append(
                {
                    "task": task,
                    "model": "minilm",
                    "device_score": scores["device"],
                    "cpu_float32_score": scores["cpu"],
                    "abs_diff": diff,
                    "tolerance": SCORE_TOLERANCE,
                    "within": diff <= SCORE_TOLERANCE,
                }
            )
            if diff > SCORE_TOLERANCE:
                section.mark("failed", f"{task}: scores differ by {diff:.5f}")
    return section


def _main_score(task: str, data_dir: Path, device: str, dtype: str, results: Path) -> float | None:
    """One task through run_eval (cache off, no units); its main score, None if it failed."""
    from neobench.evaluation.runner import run_eval
    from neobench.protocol.config import EvalConfig

    summary = run_eval(
        EvalConfig(
            model=default_model(),
            tasks=[task],
            data_dir=str(data_dir),
            device=device,
            dtype=dtype,
            results=str(results),
            no_cache=True,
            no_predictions=True,
        )
    )
    outcome = next((o for o in summary.outcomes if o.task == task), None)
    return outcome.main_score if outcome and outcome.status != "failed" else None


def topk_section(scale: GpuScale, device: str, seed: int, budget: Budget) -> Section:
    """Device top-k lists against the CPU's exact ones, on seeded random unit vectors."""
    from sentence_transformers.util import cos_sim

    section = Section()
    if budget.spent(section, "top-k"):
        return section
    g = torch.Generator().manual_seed(seed)
    queries = torch.nn.functional.normalize(torch.randn(scale.queries, scale.dim, generator=g))
    docs = torch.nn.functional.normalize(torch.randn(scale.docs, scale.dim, generator=g))
    start = time.perf_counter()
    values, indices = top_k(queries, docs, scale.k, cos_sim, device)  # back on the CPU
    device_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ref_values, ref_indices = reference_top_k(queries, docs, scale.k)
    cpu_seconds = time.perf_counter() - start
    identical = (indices == ref_indices).all(dim=1)
    gap = (values - ref_values).abs().amax(dim=1)
    near_ties = ~identical & (gap <= TIE_TOLERANCE)
    differing = int((~identical & ~near_ties).sum())
    section.rows.append(
        {
            "queries": scale.queries,
            "docs": scale.docs,
            "dim": scale.dim,
            "k": scale.k,
            "device_seconds": round(device_seconds, 4),
            "cpu_seconds": round(cpu_seconds, 4),
            "identical": int(identical.sum()),
            "near_ties": int(near_ties.sum()),
            "differing": differing,
            "max_score_diff": float(gap.max()),
            "tie_tolerance": TIE_TOLERANCE,
        }
    )
    if differing:
        section.mark("failed", f"{differing} of {scale.queries} queries got other documents")
    return section


def reference_top_k(
    queries: torch.Tensor, docs: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact k best documents per query on the CPU: each block of queries against the whole
    corpus in one product and one topk (no running merge)."""
    from sentence_transformers.util import cos_sim

    values, indices = [], []
    with torch.inference_mode(), exact_float32():
        for start in range(0, queries.shape[0], REFERENCE_BLOCK):
            scores = cos_sim(queries[start : start + REFERENCE_BLOCK], docs)
            best = scores.topk(min(k, docs.shape[0]), dim=1)
            values.append(best.values)
            indices.append(best.indices)
    return torch.cat(values), torch.cat(indices)
