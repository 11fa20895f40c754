"""Step 2 of the recipe: the training datasets, read from the mirror (or the hub) and built; the
dev slice held out (dev_slice.py) before the size check. A dataset that cannot be read, or keeps
fewer rows than one global batch, stops the run before the model loads.
"""

from __future__ import annotations

from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.protocol import mirror
from neobench.protocol.data import BuiltDataset, build_dataset
from neobench.protocol.manifest import Row
from neobench.train.dev_slice import DevSlice, split_all
from neobench.train.inputs import Inputs


def build_data(
    inputs: Inputs, data_dir: Path | None
) -> tuple[dict[str, BuiltDataset], dict[str, DevSlice]]:
    """(dataset key -> the built dataset left for training, dataset key -> its dev slice), for
    every manifest row the recipe trains on; no slices when dev_rows is 0."""
    values = inputs.recipe.values
    _check_sources(inputs.rows, data_dir, inputs.recipe.name)
    built = {
        row.key: build_dataset(row, data_dir, values.max_hard_negatives) for row in inputs.rows
    }
    # The rows of the manifest's own split only (a train split where the row is an mteb task's
    # train split): the slice is a subset of what training would have read.
    built, slices = split_all(built, values.dev_rows, values.seed)
    held = " once its dev slice is held out (dev_rows)" if slices else ""
    too_small = [
        f"dataset {k} has {len(b.dataset)} usable rows{held}, fewer than one global batch "
        f"({values.batch_size}); lower batch_size or drop it from datasets="
        for k, b in built.items()
        if len(b.dataset) < values.batch_size
    ]
    if too_small:
        raise NeobenchError(too_small)
    return built, slices


def _check_sources(rows: list[Row], data_dir: Path | None, recipe_name: str) -> None:
    """Every dataset can be read: from the mirror when there is one, else from the hub."""
    hub_rows = [r for r in rows if not r.data_files]
    prefetch = f"neobench data prefetch --recipe {recipe_name}"
    if data_dir is None:
        if hub_rows and (mirror.hub_offline() or not mirror.hub_reachable()):
            raise NeobenchError(
                [
                    f"dataset {r.key} needs repo '{r.hf_id}' from the Hugging Face hub, which "
                    "is offline or unreachable."
                    for r in hub_rows
                ]
                + [f"Fix: pass --data-dir DIR, a mirror made with `{prefetch} --out DIR`."]
            )
        return
    missing = [r for r in hub_rows if not (data_dir / r.hf_id).is_dir()]
    lines = [
        f"dataset {r.key} needs repo '{r.hf_id}', which is not in the mirror {data_dir} "
        f"(expected folder {data_dir / r.hf_id})."
        for r in missing
    ] + [
        f"dataset {r.key}: file {data_dir / f} does not exist."
        for r in rows
        if r.data_files
        for f in ([r.data_files] if isinstance(r.data_files, str) else r.data_files)
        if not (data_dir / f).is_file()
    ]
    if missing:
        lines.append(
            f"Fix: on a connected machine run `{prefetch} --out {data_dir}`, or drop them "
            "with datasets=KEY,KEY."
        )
    if lines:
        raise NeobenchError(lines)
