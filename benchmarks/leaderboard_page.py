"""The leaderboard page (`neobench table --html`) at full size: its bytes and the time to build it.

Writes a results root of synthetic but valid runs, then builds the page from it with the same
function `neobench table --html` calls, and reports the file's size and the build time:

- ``--rows`` models (default 12), each fine-tuned with ``--seeds`` seeds (default 3): one table
  row of seed replicates per model, so 36 run folders;
- every task of MTEB(eng, v1) (56), written through mteb's own objects (`ResultCache`,
  `TaskResult`), with a per-item units file beside each result and an eval run card per run
  (conditions, the fine-tune's seed, base model and recipe hash, mteb's version, the units
  files' sha256) as `neobench eval` writes them, so every reader check passes;
- the units are ``--items`` sentence pairs per task (similarity, gold): each task's stored main
  score is the Spearman correlation recomputed from them, so intervals and paired tests are
  computed for real. They are STS-shaped whatever the task's type (the page's size does not
  depend on what a unit holds, only on the rows, tasks and seeds);
- rows differ by a model effect (some close enough to be tied), a seed effect and pair noise;
  the first three models declare training on STS12 and STS13 (so the zero-shot view drops them).

    python benchmarks/leaderboard_page.py                   # 12 rows x 56 tasks x 3 seeds
    python benchmarks/leaderboard_page.py --rows 4 --seeds 2 --keep /tmp/results
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCHMARK = "MTEB(eng, v1)"
RECIPE = "5" * 64  # the recipe hash every fine-tune of the set shares
TRAINED_ON = {"STS12", "STS13"}


def write_results(root: Path, rows: int = 12, seeds: int = 3, items: int = 60) -> list[str]:
    """A results root under ``root`` (see the module docstring); returns the model names."""
    from neobench.protocol.tasks import load_benchmark, select_tasks

    tasks = select_tasks(load_benchmark(BENCHMARK))
    names = [f"synthetic/model-{i:02d}" for i in range(rows)]
    rng = np.random.default_rng(2026)
    gold = {t.metadata.name: rng.uniform(0, 1, items) for t in tasks}
    for i, name in enumerate(names):
        effect = 0.45 + 0.02 * (i // 2)  # pairs of models close enough to be tied
        for seed in range(seeds):
            noise = effect + rng.normal(0, 0.05)
            _write_run(root, name, i, seed, tasks, gold, noise, rng)
    return names


def _write_run(root, name, index, seed, tasks, gold, strength, rng) -> None:
    import mteb
    from mteb.models.model_meta import ModelMeta
    from mteb.results import TaskResult

    from neobench.core import results
    from neobench.evaluation import units

    training = TRAINED_ON if index < 3 else set()
    meta = ModelMeta.create_empty(
        overwrites={
            "name": name,
            "revision": f"rev{index:02d}s{seed}",
            "training_datasets": training,
        }
    )
    cache = mteb.ResultCache(root)
    entries, folder = {}, None
    for task in tasks:
        task_name = task.metadata.name
        found = _units(task_name, gold[task_name], strength, rng)
        score = units.main_score(found)
        scores = {
            s: {sub: {"main_score": score} for sub in task.hf_subsets} for s in task.eval_splits
        }
        result = TaskResult.from_task_results(task, scores, evaluation_time=1.0)
        cache.save_to_cache(result, meta)
        folder = cache.get_task_result_path(task_name, meta).parent
        path = units.path_for(folder, task_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(units.to_json(found))
        entries[task_name] = {"type": task.metadata.type, "status": "evaluated",
                              "main_score": score, "units": True,
                              "units_sha256": results.digest(path)}  # fmt: skip
    _write_card(folder, name, meta.revision, index, seed, entries)


def _units(task: str, gold: np.ndarray, strength: float, rng: np.random.Generator):
    from neobench.evaluation.units import Part, TaskUnits

    pred = strength * gold + rng.normal(0, 0.3, len(gold))
    ids = [str(k) for k in range(len(gold))]
    part = Part("default", "test", ids, {"pred": pred, "gold": gold})
    return TaskUnits(task, "STS", "cosine_spearman", "pair", [part])


def _write_card(folder: Path, name: str, revision: str, index: int, seed: int, entries) -> None:
    import mteb

    from neobench.core import cards as record
    from neobench.core.cards import EvalCard, EvalConditions, EvalEnvironment, EvalModel

    day = f"2026-03-{1 + index:02d}T12:0{seed}:00+00:00"
    card = EvalCard(
        started=day,
        finished=day,
        status="complete",
        benchmark=BENCHMARK,
        conditions=EvalConditions("paper", "a" * 64, 512, "float32"),
        model=EvalModel(
            name=name,
            revision=revision,
            finetune_seed=seed,
            base_model=f"synthetic/base-{index:02d}",
            base_revision="b0",
            recipe_sha256=RECIPE,
        ),
        environment=EvalEnvironment(packages={"mteb": mteb.__version__}),
        tasks=entries,
    )
    record.write_eval_card(folder / "neobench" / f"run-{day}.yaml", card)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--items", type=int, default=60, help="sentence pairs per task")
    parser.add_argument("--keep", help="write the results root here (default: a temporary one)")
    parser.add_argument("--reuse", help="build the page from this results root, written before")
    args = parser.parse_args()

    from neobench.report.page import page_data
    from neobench.report.render.html import to_html

    root = Path(args.reuse or args.keep or tempfile.mkdtemp(prefix="neobench-page-"))
    started = time.perf_counter()
    if args.reuse:
        names = [f"synthetic/model-{i:02d}" for i in range(args.rows)]
    else:
        names = write_results(root, args.rows, args.seeds, args.items)
    written = time.perf_counter() - started
    out = root / "leaderboard.html"
    started = time.perf_counter()
    cpu = time.process_time()
    # What `neobench table --html` calls (cli/report.py).
    data = page_data([root], BENCHMARK, reference="paper", baseline=names[0])
    out.write_text(to_html(data), encoding="utf-8")
    built, cpu = time.perf_counter() - started, time.process_time() - cpu
    size = out.stat().st_size
    print(f"{args.rows} rows x 56 tasks x {args.seeds} seeds (+10 paper rows): {out}")
    print(f"results written in {written:.1f} s; page built in {built:.1f} s ({cpu:.1f} s CPU)")
    print(f"page: {size:,} bytes ({size / 2**20:.2f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
