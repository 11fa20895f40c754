"""Run cards, written before work starts and rewritten when it ends: the typed eval and
fine-tuning cards, each with its writer and reader (what a card records: docs/guide.md, "Run
cards"); storage is core/card_io.py, the environment section core/provenance.py.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

from neobench.core.card_io import (
    card_from_dict,
    card_to_dict,
    dataclass_in,
    mark_orphaned,
    read_card,
    write_card,
)

# --- The eval card (neobench/run-*.yaml beside the task results) ------------------------------
# Sections with fixed keys are dataclasses; those whose keys vary stay mappings.


@dataclasses.dataclass
class EvalShard:
    k: int = 1
    n: int = 1
    tasks: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EvalConditions:
    """What decides whether two runs' numbers may be compared (and share a results folder)."""

    instructions: str | None = None  # profile name
    instructions_sha256: str | None = None
    max_seq_length: int | None = None
    dtype: str | None = None  # float32 | float16 | bfloat16
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EvalModel:
    name: str | None = None  # under which results are filed
    revision: str | None = None  # hub commit or local content hash
    source: str | None = None
    kind: str | None = None
    path: str | None = None
    architecture: str | None = None
    max_seq_length: int | None = None
    attn_implementation: str | None = None
    attn_implementation_requested: str | None = None
    unpadded: bool | None = None
    tokenizer: Any = None
    trust_remote_code: bool | None = None
    pooling: str | None = None
    recipe_sha256: str | None = None  # set when `neobench finetune` made the model
    # From the fine-tuning card, written only when it gave them: they tell seed replicates apart.
    finetune_seed: int | None = None
    base_model: str | None = None
    base_revision: str | None = None
    # `neobench eval --sweep` only (core/selection.py); its hash is the recipe condition.
    sweep: dict[str, Any] | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EvalInstructions:
    profile: str | None = None
    file: str | None = None
    sha256: str | None = None
    prompts: dict[str, str] = dataclasses.field(default_factory=dict)  # mteb prompt keys
    tasks_without_instruction: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EvalEnvironment:
    neobench_version: str | None = None
    git_sha: str | None = None
    python: str | None = None
    platform: str | None = None
    packages: dict[str, str | None] = dataclasses.field(default_factory=dict)
    command: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EvalCard:
    """One `neobench eval` process: written before any work, rewritten after each task."""

    kind: str = "neobench eval"
    started: str | None = None
    status: str = "running"  # running | complete | failed[: reason] | interrupted
    owner: dict[str, Any] | None = None  # {host, pid}: tells a live run from a dead one
    config: dict[str, Any] = dataclasses.field(default_factory=dict)  # the EvalConfig
    benchmark: str | None = None
    shard: EvalShard = dataclasses.field(default_factory=EvalShard)
    conditions: EvalConditions = dataclasses.field(default_factory=EvalConditions)
    model: EvalModel = dataclasses.field(default_factory=EvalModel)
    runtime: dict[str, Any] = dataclasses.field(default_factory=dict)  # device, dtype, threads
    instructions: EvalInstructions = dataclasses.field(default_factory=EvalInstructions)
    data: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # task -> revisions
    seeds: dict[str, Any] = dataclasses.field(default_factory=dict)
    environment: EvalEnvironment = dataclasses.field(default_factory=EvalEnvironment)
    # The patches in force (compat/patches.py), empty when off (same scores either way); None: a
    # card of a neobench that did not record them.
    library_patches: list[str] | None = None
    # Why patches are off ({why: NEOBENCH_PATCHES=off} or {why: unverified library versions,
    # untested: [unpadded-attention: transformers 5.25.0 (verified: ==5.24.0)]}); absent when all
    # are in force.
    library_patches_off: dict[str, Any] | None = None
    tasks: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # task -> outcome
    # Written when the run ends (or is found dead); absent from the YAML until then.
    finished: str | None = None
    encoding: dict[str, Any] | None = None  # embedding cache use, token budget
    interrupted: dict[str, Any] | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def mteb_version(self) -> str | None:
        return self.environment.packages.get("mteb")


_UNTIL_SET = ("finished", "encoding", "interrupted")
# Absent from an older card (written back without it), or only written when set.
_SINCE = ("library_patches", "library_patches_off")
_MODEL_IF_SET = ("finetune_seed", "base_model", "base_revision", "sweep")


def eval_card_to_dict(card: EvalCard) -> dict[str, Any]:
    """The YAML mapping, keys unset (_UNTIL_SET, _SINCE, _MODEL_IF_SET) left out: a card read and
    written back keeps the layout it had."""
    data = card_to_dict(card)
    model = data.get("model")
    if isinstance(model, dict):
        data["model"] = {k: v for k, v in model.items() if not (k in _MODEL_IF_SET and v is None)}
    return {k: v for k, v in data.items() if not (k in (*_UNTIL_SET, *_SINCE) and v is None)}


def write_eval_card(path: Path, card: EvalCard) -> None:
    write_card(path, eval_card_to_dict(card))


def read_eval_card(path: Path) -> EvalCard:
    """An eval card of any neobench version; an unreadable file is a NeobenchError naming it."""
    card = card_from_dict(EvalCard, read_card(path))
    # `conditions: null` and the like become empty sections, so readers need no None checks.
    hints = typing.get_type_hints(EvalCard)
    for f in dataclasses.fields(card):
        section = dataclass_in(hints[f.name])
        if section is not None and getattr(card, f.name) is None:
            setattr(card, f.name, section())
    return card


def mark_orphaned_eval_card(path: Path, card: EvalCard) -> bool:
    """mark_orphaned on the card's YAML view (the rewrite keeps its layout), the typed card
    updated too; True when its process was gone."""
    view = eval_card_to_dict(card)
    if not mark_orphaned(path, view):
        return False
    card.status, card.interrupted = view["status"], view["interrupted"]
    return True


# --- The fine-tuning card (written into the output folder before training, completed at the end)

FINETUNE_CARD = "neobench_run_card.yaml"


@dataclasses.dataclass
class OutputModel:
    """What an evaluation of the fine-tuned folder records about it."""

    name: str | None = None
    recipe_sha256: str | None = None
    # mteb's ModelMeta.training_datasets / adapted_from: the tasks whose data it trained on (the
    # datasets' in_domain), and the base's mteb name, through which mteb adds the base's own.
    training_datasets: list[str] | None = None
    adapted_from: str | None = None
    seed: int | None = None  # the recipe's seed: the one value seed replicates differ in
    base_model: str | None = None  # the model fine-tuned (its name and revision when loaded)
    base_revision: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ManifestRecord:
    name: str | None = None
    file: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class InstructionsRecord:
    train_profile: str | None = None
    train_sha256: str | None = None
    eval_profile: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class BaseModelRecord:
    """The model the run started from, as loaded for training."""

    base: str | None = None  # what --model said
    name: str | None = None
    revision: str | None = None
    architecture: str | None = None
    max_seq_length: int | None = None
    # The kernel the training forwards ran: packed, the varlen one (the card's `padding`).
    attn_implementation: str | None = None
    attn_implementation_requested: str | None = None
    tokenizer: dict[str, Any] = dataclasses.field(default_factory=dict)
    pooling: str | None = None
    recipe_sha256: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class FinetuneCard:
    """neobench_run_card.yaml of a fine-tuned folder; fields in the order they are written."""

    kind: str = "neobench finetune"
    started: str | None = None
    status: str | None = None  # running | complete | failed: ... | stopped: ... | interrupted
    owner: dict[str, Any] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)  # the FinetuneConfig as given
    recipe: dict[str, Any] = dataclasses.field(default_factory=dict)  # Recipe.record()
    manifest: ManifestRecord = dataclasses.field(default_factory=ManifestRecord)
    data: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # per dataset key
    sampling_probabilities: dict[str, float] = dataclasses.field(default_factory=dict)
    # Evaluation task -> the shares of its units and texts found in this manifest's training
    # data, as `neobench overlap` measured them (protocol/contamination.py); {}: none measured.
    contamination: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    instructions: InstructionsRecord = dataclasses.field(default_factory=InstructionsRecord)
    output_model: OutputModel = dataclasses.field(default_factory=OutputModel)
    model: BaseModelRecord = dataclasses.field(default_factory=BaseModelRecord)
    runtime: dict[str, Any] = dataclasses.field(default_factory=dict)
    # --padding: what the training forwards ran (packed | padded), by what, and why padded when
    # packed was asked (train/packing.py); None in cards from before the flag.
    padding: dict[str, Any] | None = None
    # The memory budget, the steps run in GradCache chunks, their chunks and why
    # (train/memory_budget.py); None where no budget applied (the CPU without --memory-budget).
    memory: dict[str, Any] | None = None
    seed: int | None = None
    environment: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Set when the run ends (finished) or completes (all four).
    finished: str | None = None
    steps: int | None = None
    final_loss: float | None = None
    checkpoints: str | None = None
    # The held-out dev slice and its metric (train/dev_slice.py), only when one is held out.
    dev: dict[str, Any] | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


_ENDING = ("finished", "steps", "final_loss", "checkpoints")


def write_finetune_card(path: Path, card: FinetuneCard) -> None:
    """Write atomically: ending keys only once set (all of them when complete), `dev` only when
    a slice is held out."""
    data = card_to_dict(card)
    if card.status != "complete":
        data = {k: v for k, v in data.items() if k not in _ENDING or v is not None}
    if card.dev is None:
        data.pop("dev", None)
    write_card(path, data)


def read_finetune_card(path: Path) -> FinetuneCard:
    """A fine-tuning card, whichever version wrote it; an unreadable one is a NeobenchError."""
    return card_from_dict(FinetuneCard, read_card(path))


def folder_card(folder: Path) -> FinetuneCard | None:
    path = Path(folder) / FINETUNE_CARD
    return read_finetune_card(path) if path.is_file() else None


def finetuned_model(folder: Path) -> OutputModel | None:
    """Name, recipe hash, seed and base model `neobench finetune` recorded in a model folder, if
    it did (from the `seed` and `model` sections of cards older than those fields)."""
    card = folder_card(folder)
    if card is None or card.kind != "neobench finetune" or not card.output_model:
        return None
    model = card.output_model
    recorded = card.data and all("in_domain" in entry for entry in card.data.values())
    base = card.model or BaseModelRecord()
    if model.training_datasets is None and recorded:
        # An older card: its datasets say what was trained on; a hub base is named by its id.
        model.training_datasets = in_domain_tasks(card.data)
        model.adapted_from = base.name if base.name and base.name == base.base else None
    return dataclasses.replace(
        model,
        seed=model.seed if model.seed is not None else card.seed,
        base_model=model.base_model or base.name,
        base_revision=model.base_revision or base.revision,
    )


@dataclasses.dataclass(frozen=True)
class DevResult:
    """A fine-tune's dev metric as its card records it; two are comparable when `definition`
    and `digest` are equal (same slice, same metric)."""

    metric: str  # mrr@10: the selection number
    value: float | None  # macro mean over datasets; None until the run completes
    per_dataset: dict[str, dict[str, Any]]  # key -> queries, rows, digest, mrr@10, accuracy@1
    definition: dict[str, Any]  # version, dev_rows, max_share, seed, id rule, metrics
    digest: str  # sha256 over the datasets' digests of held-out ids


def finetune_dev(folder: Path) -> DevResult | None:
    """The dev metric of a fine-tuned folder's card (YAML only); None without a slice or card."""
    card = folder_card(folder)
    dev = card.dev if card is not None else None
    if not isinstance(dev, dict):
        return None
    return DevResult(
        metric=str(dev.get("metric")),
        value=dev.get("value"),
        per_dataset=dict(dev.get("datasets") or {}),
        definition=dict(dev.get("definition") or {}),
        digest=str(dev.get("digest")),
    )


def in_domain_tasks(data: dict[str, dict[str, Any]]) -> list[str]:
    """The mteb tasks a fine-tune trained on: the union of its card's datasets' ``in_domain``."""
    return sorted({task for entry in data.values() for task in entry.get("in_domain") or []})
