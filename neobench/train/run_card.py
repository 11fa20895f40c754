"""The run card of a fine-tuning run (core/cards.FinetuneCard): written before any training (step
4) and rewritten at the end, so an output folder always says how its model was made, or how far
its run got.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from neobench.compat.datasets import fingerprint
from neobench.core import cards as record
from neobench.core.card_io import now, owner
from neobench.core.cards import FinetuneCard
from neobench.core.provenance import device_info, environment
from neobench.models.load import LoadedModel
from neobench.protocol import contamination, mirror
from neobench.protocol.config import FinetuneConfig
from neobench.protocol.data import BuiltDataset
from neobench.protocol.overlap import finetune_declaration
from neobench.train.devices import bf16, is_main_process
from neobench.train.inputs import Inputs
from neobench.train.output import CARD
from neobench.train.seeds import default_name

if TYPE_CHECKING:
    from neobench.train.packing import Padding

logger = logging.getLogger(__name__)


def start_card(
    cfg: FinetuneConfig,
    inputs: Inputs,
    loaded: LoadedModel,
    built: dict[str, BuiltDataset],
    data_dir: Path | None,
    device: str,
) -> FinetuneCard:
    """The card of a run about to start (status running): config, recipe, data, model, device,
    environment."""
    recipe, values = inputs.recipe, inputs.recipe.values
    data = _data_records(built, data_dir)
    # What the model will declare it trained on (mteb's ModelMeta vocabulary; protocol/overlap)
    trained, adapted_from = finetune_declaration(data, loaded.name, loaded.source, loaded.path)
    return FinetuneCard(
        started=now(),
        status="running",
        owner=owner(),
        config=asdict(cfg),
        recipe=recipe.record(),
        manifest=record.ManifestRecord(inputs.manifest.name, inputs.manifest.path),
        data=data,
        sampling_probabilities=_probabilities(built, values.sampling_alpha),
        contamination=contamination.cached_summaries(
            contamination.manifest_digest(inputs.manifest.path, data_dir)
        ),
        instructions=record.InstructionsRecord(
            inputs.train_profile.name, inputs.train_profile.sha256, values.eval_instructions
        ),
        output_model=record.OutputModel(
            cfg.model_name or default_name(cfg.output),
            recipe.sha256,
            training_datasets=trained,
            adapted_from=adapted_from,
            seed=values.seed,
            base_model=loaded.name,
            base_revision=loaded.revision,
        ),
        model=record.BaseModelRecord(
            base=cfg.model,
            name=loaded.name,
            revision=loaded.revision,
            architecture=loaded.architecture,
            max_seq_length=loaded.max_seq_length,
            attn_implementation=loaded.forward_attn_implementation,
            attn_implementation_requested=cfg.attn_implementation,
            tokenizer=loaded.tokenizer,
            pooling=values.pooling,
            recipe_sha256=recipe.sha256,
        ),
        runtime=_runtime(inputs, device),
        seed=values.seed,
        environment=environment(),
    )


def record_padding(card: FinetuneCard, padding: Padding) -> None:
    """How the training forwards run (--padding, train/packing.py): the card's ``padding``,
    and the attention kernel they run as the model's."""
    card.padding = padding.record()
    card.model.attn_implementation = padding.attention


def _runtime(inputs: Inputs, device: str) -> dict[str, object]:
    """Where the run trains: the device, the number of processes, the precision, the threads."""
    import torch

    return {
        **device_info(device),
        "world_size": inputs.world,
        "dtype": "bfloat16 autocast" if bf16(inputs.recipe.values, device) else "float32",
        "torch_threads": torch.get_num_threads(),
    }


def _data_records(built: dict[str, BuiltDataset], data_dir: Path | None) -> dict[str, dict]:
    """Where each dataset came from (pinned and mirrored revision) and what was kept of it."""
    lock = mirror.read_lock(data_dir) if data_dir else {}
    return {
        key: {
            "repo_id": b.row.repo_id,
            "config": b.row.config,
            "split": b.row.split,
            "pinned_revision": b.row.revision,
            "mirror_revision": (lock.get(b.row.hf_id) or {}).get("resolved_revision"),
            "source": b.source,
            "rows_raw": b.rows_raw,
            "rows": len(b.dataset),
            "negatives_per_query": b.num_negatives,
            "fingerprint": fingerprint(b.dataset),
            "instruction": b.row.instruction,
            "in_domain": b.row.in_domain,
        }
        for key, b in built.items()
    }


def _probabilities(built: dict[str, BuiltDataset], alpha: float) -> dict[str, float]:
    # Imported here: the sampler module imports sentence-transformers.
    from neobench.train.sampling import probabilities

    p = probabilities([len(b.dataset) for b in built.values()], alpha)
    return {k: round(float(v), 6) for k, v in zip(built, p, strict=True)}


def end_card(output: Path, card: FinetuneCard, status: str) -> None:
    """Say in the card how the run ended; a folder that takes no more writes keeps the old card,
    read as orphaned (its process gone) by the next run."""
    if not is_main_process():
        return
    card.status, card.finished = status, now()
    try:
        record.write_finetune_card(output / CARD, card)
    except OSError as error:
        logger.warning("could not update %s: %s", output / CARD, error.strerror)


def complete_card(
    output: Path, card: FinetuneCard, steps: int, final_loss: float | None, keep: bool
) -> None:
    """Complete the card of a run whose model is saved: steps, final loss, its checkpoints."""
    card.status, card.finished = "complete", now()
    card.steps, card.final_loss = steps, final_loss
    card.checkpoints = "kept" if keep else "removed (run complete)"
    record.write_finetune_card(output / CARD, card)
