"""Never out of memory by design (train/memory_budget.py), on the CPU with --memory-budget: a
tiny BERT fine-tuned 10 steps on real pairs with a budget that forces GradCache chunks, and with
an out-of-memory error on its first step, ends with the plain run's losses and weights; the run
card records the chunks and why, the recipe hash is the plain run's. Also the budget's checks,
`finetune --dry-run`, and the token lengths a mirror's lock keeps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from conftest import SHARED
from safetensors.torch import load_file
from transformers import TrainerCallback

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.models import memory
from neobench.models.memory import GIB, Column, Precision, Step
from neobench.train.finetune import FinetuneConfig, finetune
from neobench.train.telemetry import read_curve

FINETUNE_DATA = SHARED / "data" / "finetune"
# SciFact's claims and abstracts (cut at 96 tokens): steps whose activations outweigh the tiny
# BERT's gradients (its 30,522-word table), so that chunks save memory, as at real size.
RECIPE = ["manifest=sample-local", "datasets=SCIFACT", "max_seq_length=96", "batch_size=16",
          "max_steps=10", "checkpoint_every=100"]  # fmt: skip
LOSS_TOLERANCE, WEIGHT_TOLERANCE = 1e-5, 1e-4


def run(model: Path, output: Path, callbacks: list | None = None, **kwargs) -> dict:
    """A fine-tune on the CPU: its losses, final weights and run card."""
    cfg = FinetuneConfig(
        model=str(model), output=str(output), overrides=RECIPE, data_dir=str(FINETUNE_DATA),
        device="cpu", **kwargs,
    )  # fmt: skip
    finetune(cfg, extra_callbacks=callbacks, progress=False)
    return {
        "losses": [r["loss"] for r in read_curve(output / "neobench_loss_curve.jsonl")],
        "weights": load_file(output / "model.safetensors"),
        "card": yaml.safe_load((output / "neobench_run_card.yaml").read_text()),
    }


def largest(a: dict, b: dict) -> tuple[float, float]:
    """The largest differences of two runs: loss per step, then any weight."""
    loss = max(abs(x - y) for x, y in zip(a["losses"], b["losses"], strict=True))
    weight = max((a["weights"][k] - b["weights"][k]).abs().max().item() for k in a["weights"])
    return loss, weight


def fields_of(model: Path) -> dict:
    return json.loads((model / "config.json").read_text())


@pytest.fixture(scope="module")
def plain(tiny_bert, tmp_path_factory) -> dict:
    """The plain run: on the CPU, without a budget, nothing is chunked."""
    found = run(tiny_bert, tmp_path_factory.mktemp("plain") / "run")
    assert found["card"]["memory"] is None
    return found


@pytest.mark.slow
def test_chunks_change_memory_not_the_numbers(plain, tiny_bert, tmp_path):
    # A budget that holds 4 texts of 96 tokens at a time, not a whole step.
    step = Step((Column.padded(16, 96),) * 2)
    cpu = Precision(False)
    fields = fields_of(tiny_bert)
    budget = memory.estimate(fields, step.chunked(4), cpu).peak
    assert budget < memory.estimate(fields, step, cpu).peak
    chunked = run(tiny_bert, tmp_path / "chunked", memory_budget=budget / GIB)
    loss, weight = largest(plain, chunked)
    assert loss < LOSS_TOLERANCE and weight < WEIGHT_TOLERANCE, (loss, weight)
    record = chunked["card"]["memory"]
    assert record["chunked_steps"] == 10 and record["plain_steps"] == 0
    assert set(record["chunks"]) == {"4 texts"}
    assert list(record["why"]) == [f"estimate over the budget (--memory-budget {budget / GIB:g})"]
    # Memory, not the method: the same recipe and hash, the budget in the card's config only.
    assert chunked["card"]["recipe"] == plain["card"]["recipe"]
    assert chunked["card"]["config"]["memory_budget"] == pytest.approx(budget / GIB)
    print(f"chunked vs plain: largest loss difference {loss:.3g}, weight difference {weight:.3g}")


class OutOfMemoryOnce:
    """A forward hook that raises torch.OutOfMemoryError the first time the layer runs."""

    def __init__(self) -> None:
        self.raised = False

    def __call__(self, module, inputs, output):
        if not self.raised:
            self.raised = True
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")


class HookFirstLayer(TrainerCallback):
    """Puts a forward hook on the backbone's first layer when training begins."""

    def __init__(self, hook) -> None:
        self.hook = hook

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        model[0].auto_model.encoder.layer[0].register_forward_hook(self.hook)


@pytest.mark.slow
def test_an_out_of_memory_step_runs_again_in_chunks(plain, tiny_bert, tmp_path):
    """A budget every step fits, and an out-of-memory error in the first step's forward: the
    step runs again in chunks, the budget drops below its estimate, and the run ends as the
    plain one does."""
    hook = OutOfMemoryOnce()
    found = run(tiny_bert, tmp_path / "oom", memory_budget=1.0, callbacks=[HookFirstLayer(hook)])
    assert hook.raised
    loss, weight = largest(plain, found)
    assert loss < LOSS_TOLERANCE and weight < WEIGHT_TOLERANCE, (loss, weight)
    record = found["card"]["memory"]
    [event] = record["out_of_memory"]
    assert event["step"] == 1 and event["in"] == "forward"
    assert event["budget_after_gib"] < 1.0 and record["chunked_steps"] >= 1
    print(f"after the simulated OOM: largest loss difference {loss:.3g}, weight {weight:.3g}")


def test_an_out_of_memory_backward_runs_the_step_again_in_chunks(tiny_bert):
    """The backward of a plain step runs in the loss's hook: an out-of-memory error there
    (raised once from a layer's backward hook) leaves the gradients the plain loss makes."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from neobench.train.memory_budget import BudgetedLoss
    from neobench.train.step_plan import Budget

    model = SentenceTransformer(str(tiny_bert), device="cpu")
    model.max_seq_length = 96
    # 16 queries and passages long enough that their activations, not the gradients, dominate.
    words = ["claim", "evidence", "abstract", "protein", "cell", "study", "result"]
    texts = [[" ".join(words[(i + j) % 7] for j in range(n)) for i in range(16)] for n in (20, 90)]
    features = [model.preprocess(column) for column in texts]
    common = {"scale": 20.0}

    def gradients(loss) -> dict[str, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        copies = [
            {k: torch.clone(v) if torch.is_tensor(v) else v for k, v in f.items()} for f in features
        ]
        loss(copies, None).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    expected = gradients(MultipleNegativesRankingLoss(model, **common))
    fields = model[0].auto_model.config.to_dict()
    budgeted = BudgetedLoss(
        model, common, fields, Precision(False), Budget(GIB, "test"), world=1, unpads=False
    )
    raised = []

    def once(module, grad_input, grad_output):
        if not raised:
            raised.append(True)
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    model[0].auto_model.encoder.layer[0].register_full_backward_hook(once)
    found = gradients(budgeted)
    assert raised and found.keys() == expected.keys()
    assert max((found[k] - expected[k]).abs().max().item() for k in found) < 1e-5
    [event] = budgeted.log.out_of_memory
    assert event["in"] == "backward"


def test_a_budget_below_the_model_states_is_one_clear_error(tiny_bert, tmp_path):
    with pytest.raises(NeobenchError, match="holds less than one text at a time"):
        run(tiny_bert, tmp_path / "small", memory_budget=0.001)
    with pytest.raises(NeobenchError, match=r"--memory-budget -2: give the GiB"):
        run(tiny_bert, tmp_path / "negative", memory_budget=-2)


def test_the_dry_run_prints_each_datasets_step_and_trains_nothing(capsys, tiny_bert, tmp_path):
    out = tmp_path / "never"
    code = main(["finetune", "--model", str(tiny_bert), "--output", str(out), "--data-dir",
                 str(FINETUNE_DATA), "manifest=sample-local", "max_seq_length=96",
                 "--memory-budget", "0.02", "--dry-run"])  # fmt: skip
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())
    assert code == 0 and not out.exists()
    for key in ("SNLI", "AGNEWS", "STSB", "WIKIQA", "SCIFACT"):
        assert key in text
    packed = "Estimated on the CPU, in float32: the formula; varlen attention, packed"
    assert packed in text
    assert "Lengths: each column's texts at its p90, measured (5 datasets)." in text
    assert "Budget: 0.02 GiB (--memory-budget 0.02)." in text
    assert "GradCache chunks of" in text  # SciFact's 128 abstracts at 96 tokens do not fit
    peak = re.search(r"\(SCIFACT\) peaks at ([0-9.]+) GiB", text)
    # Padded, every column runs at its longest text: more memory than packed.
    code = main(["finetune", "--model", str(tiny_bert), "--output", str(out), "--data-dir",
                 str(FINETUNE_DATA), "manifest=sample-local", "max_seq_length=96",
                 "--memory-budget", "0.02", "--padding", "padded", "--dry-run"])  # fmt: skip
    captured = capsys.readouterr()
    padded = " ".join((captured.out + captured.err).split())
    assert code == 0 and not out.exists()
    assert "Estimated on the CPU, in float32: the formula; sdpa attention, padded." in padded
    assert "Lengths: each column's longest text, measured (5 datasets)." in padded
    padded_peak = re.search(r"\(SCIFACT\) peaks at ([0-9.]+) GiB", padded)
    assert peak and padded_peak and float(padded_peak[1]) > float(peak[1])


def test_a_mirror_keeps_its_datasets_token_lengths(mirror, tmp_path):
    """`data prefetch --recipe` measures each training dataset's lengths into the lock; a dry run
    reads them there (and counts them where the data is here but the lock has none)."""
    from neobench.protocol import manifest as manifests
    from neobench.protocol import mirror as mirrors

    (tmp_path / "m" / "mteb").mkdir(parents=True)
    repo = "mteb/stsbenchmark-sts"
    (tmp_path / "m" / repo).symlink_to(mirror / repo)
    lock = {repo: {"pinned_revision": "b0fddb56ed78048fa8b90373c8a3cfc37b684831"}}
    (tmp_path / "m" / mirrors.LOCK_FILE).write_text(json.dumps(lock))
    row = manifests.load_manifest("neobert-mteb").rows["STSBENCHMARK"]
    counted = mirrors.training_lengths([row], tmp_path / "m", 7)[row.key]
    assert counted[1] == "counted now"
    kept = mirrors.record_lengths(tmp_path / "m", [row], 7)[repo]["lengths"][row.key]
    assert kept == counted[0]
    assert kept["tokenizer"] == "bert-base-uncased" and kept["rows_measured"] == kept["rows"]
    for column in ("query", "positive"):
        stats = kept["columns"][column]
        assert stats["p50"] <= stats["p90"] <= stats["p99"] <= stats["max"]
    found = mirrors.training_lengths([row], tmp_path / "m", 7, measure=False)[row.key]
    assert found == (kept, f"the lock of {tmp_path / 'm'}")
