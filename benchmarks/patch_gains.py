"""What each library patch of the registry (neobench/compat/patches.py) saves on MTEB(eng, v1).

Each patch's step is timed directly on the mirror's data, the library's own path against the
patched one, alternated --reps times in one process, as the main thread's CPU seconds (on a
shared machine, wall seconds include waiting for a core). The saving per unit (a label read, a
text, a document, a query) is then multiplied by how many units a whole MTEB(eng, v1) run has,
counted from mteb's descriptive statistics of its tasks (the subsets and splits the benchmark
runs), and compared with 2% of the 2.1 host hours docs/performance.md extrapolates.

    python benchmarks/patch_gains.py --data-dir ../shared/data/hub
    python benchmarks/patch_gains.py --data-dir ../shared/data/hub --reps 9 --json gains.json

Steps timed (the patch's name, then what is compared):

- column-cache: mteb's undersampling of Banking77's training split over its 10 experiments (a
  label read each), and mteb's text data loader built over Banking77's test split (a text each);
- mteb-texts: mteb's data loader of SciFact's corpus, ten times over, iterated for its texts,
  against the column-wise texts (a document each); a text data loader's batches against its
  column (a text each);
- prediction-json: mteb's prediction file writer and the units' read back, against the copy kept
  in memory, for 1,000 queries of 1,000 ranked ids (a query each).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

BENCHMARK = "MTEB(eng, v1)"
HOST_SECONDS = 2.1 * 3600  # one model's v1 run on 2 cores (docs/performance.md)
THRESHOLD = 0.02


def timed(stock, patched, reps: int) -> tuple[list[float], list[float]]:
    """CPU seconds of this thread, the two alternated ``reps`` times."""
    pairs = []
    for _ in range(reps):
        pair = []
        for step in (stock, patched):
            start = time.thread_time()
            step()
            pair.append(time.thread_time() - start)
        pairs.append(pair)
    return [p[0] for p in pairs], [p[1] for p in pairs]


def task(name: str, data_dir: Path):
    import mteb

    from neobench.protocol import mirror

    loaded = next(t for t in mteb.get_benchmark(BENCHMARK).tasks if t.metadata.name == name)
    mirror.point_tasks_at_mirror([loaded], data_dir.resolve(), BENCHMARK)
    loaded.load_data()
    return loaded


def steps(data_dir: Path) -> list[tuple[str, str, str, Any, Any, int]]:
    """(patch, step, unit, stock step, patched step, units per step)."""
    import datasets
    import numpy as np
    from mteb.types import PromptType

    from neobench.compat import patches
    from neobench.compat.mteb import (
        PlainRanking,
        create_dataloader,
        document_texts,
        loader_texts,
        save_task_predictions,
        stock_save_predictions,
    )
    from neobench.compat.mteb import (
        undersample as mteb_undersample,
    )

    def patched(name: str, step):
        def run() -> None:
            with patches.applied(name):
                step()

        return run

    banking = task("Banking77Classification", data_dir)
    train, test = banking.dataset["train"], banking.dataset["test"]

    def undersample() -> None:
        for experiment in range(banking.n_experiments):
            mteb_undersample(banking, train, experiment)

    def text_loader():
        return create_dataloader(
            test, task_metadata=banking.metadata, input_column="text", batch_size=32
        )

    scifact = task("SciFact", data_dir)
    corpus = datasets.concatenate_datasets([scifact.dataset["default"]["test"]["corpus"]] * 10)

    def corpus_loader_texts() -> None:
        loader = create_dataloader(
            corpus, task_metadata=scifact.metadata, prompt_type=PromptType.document
        )
        [text for batch in loader for text in batch["text"]]

    loader = text_loader()

    rng = np.random.default_rng(0)
    ids = [f"doc{i}" for i in range(10_000)]
    ranking = PlainRanking(
        {
            f"q{q}": dict(
                zip(
                    rng.choice(ids, 1000, replace=False).tolist(),
                    rng.random(1000).tolist(),
                    strict=True,
                )
            )
            for q in range(1000)
        }
    )

    class Model:  # what a prediction writer reads of the model
        class mteb_model_meta:
            name, revision = "m", "r"

    folder = Path(tempfile.mkdtemp(prefix="patch-gains-"))

    def mteb_writer() -> None:  # mteb's json.dump to the file, then the units' read back
        for path in folder.glob("*"):
            path.unlink()
        stock_save_predictions(scifact, ranking, Model, folder, "test", "default")
        json.loads((folder / scifact.prediction_file_name).read_text(encoding="utf-8"))

    def kept() -> None:
        save_task_predictions(scifact, ranking, Model, folder, "test", "default", kept={})

    def loader_batches() -> None:
        [text for batch in loader for text in batch["text"]]

    undersampled = banking.n_experiments * len(train)
    return [
        ("column-cache", "undersampling", "label read", undersample,
         patched("column-cache", undersample), undersampled),
        ("column-cache", "text data loader", "loader text", text_loader,
         patched("column-cache", text_loader), len(test)),
        ("mteb-texts", "corpus texts", "document", corpus_loader_texts,
         lambda: document_texts(corpus, ["text"]), len(corpus)),
        ("mteb-texts", "loader texts", "text", loader_batches,
         lambda: loader_texts(loader), len(test)),
        ("prediction-json", "write and read back", "query", mteb_writer, kept, len(ranking)),
    ]  # fmt: skip


def v1_units() -> dict[str, int]:
    """How many of each unit one model's MTEB(eng, v1) run has (mteb's descriptive statistics
    of the subsets and splits the benchmark runs)."""
    import mteb

    from neobench.protocol.instructions import expand

    counts = dict.fromkeys(("label read", "loader text", "document", "text", "query"), 0)
    for item in expand(list(mteb.get_benchmark(BENCHMARK).tasks)):
        meta = item.metadata
        stats = meta.descriptive_stats or {}

        def part(split: str, stats: dict = stats, item: Any = item) -> list[dict]:
            block = stats.get(split) or {}
            subsets = block.get("hf_subset_descriptive_stats")
            if subsets:
                return [subsets[s] for s in item.hf_subsets if s in subsets]
            return [block] if block else []

        evaluated = [b for split in item.eval_splits for b in part(split)]
        samples = sum(b.get("num_samples", 0) for b in evaluated)
        if meta.type == "Retrieval":
            counts["query"] += sum(b.get("num_queries") or 0 for b in evaluated)
            counts["document"] += sum(b.get("num_documents") or 0 for b in evaluated)
        elif meta.type == "Classification":
            trained = sum(b.get("num_samples", 0) for b in part(item.train_split))
            labels = sum(
                len((b.get("label_statistics") or {}).get("labels") or {}) for b in evaluated
            )
            # Every training label is read once per experiment; the loaders convert the test
            # texts and each experiment's undersampled training texts.
            counts["label read"] += item.n_experiments * trained
            undersampled = item.n_experiments * item.samples_per_label * labels
            counts["loader text"] += samples + undersampled
            counts["text"] += samples + undersampled
        elif meta.type in ("STS", "PairClassification"):
            counts["loader text"] += 2 * samples  # two texts a pair
            counts["text"] += 2 * samples
        elif meta.type in ("Clustering", "Summarization"):
            counts["text"] += samples
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="the offline mirror")
    parser.add_argument("--reps", type=int, default=5, help="alternations of each step")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import datasets

    datasets.disable_progress_bars()
    units = v1_units()
    rows, by_patch = [], {}
    for patch, step, unit, stock, patched, n in steps(Path(args.data_dir)):
        stock_s, patched_s = timed(stock, patched, args.reps)
        saved = [(a - b) / n for a, b in zip(stock_s, patched_s, strict=True)]
        v1 = statistics.median(saved) * units[unit]
        by_patch[patch] = by_patch.get(patch, 0.0) + v1
        rows.append(
            {
                "patch": patch,
                "step": step,
                "unit": unit,
                "units_per_step": n,
                "stock_seconds": stock_s,
                "patched_seconds": patched_s,
                "saved_us_per_unit": {
                    "median": statistics.median(saved) * 1e6,
                    "min": min(saved) * 1e6,
                    "max": max(saved) * 1e6,
                },
                "v1_units": units[unit],
                "v1_seconds": v1,
            }
        )
        print(
            f"{patch:16} {step:20} {statistics.median(saved) * 1e6:9.2f} us per {unit} "
            f"({min(saved) * 1e6:.2f}-{max(saved) * 1e6:.2f}) x {units[unit]:,} = {v1:7.0f} s",
            flush=True,
        )
    for patch, seconds in by_patch.items():
        share = seconds / HOST_SECONDS
        verdict = "keep" if share >= THRESHOLD else "drop"
        print(f"{patch:16} {seconds:7.0f} s of a v1 run, {share:.1%} of 2.1 host hours: {verdict}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "v1_units": units}, indent=1))


if __name__ == "__main__":
    main()
