"""neobench finetune on real pairs and triplets (../shared/data/finetune) and the real manifest."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import REPO, SHARED
from sentence_transformers import SentenceTransformer

from neobench.cli.run import cmd_finetune
from neobench.core import cards as record
from neobench.core.card_io import write_card
from neobench.core.errors import NeobenchError
from neobench.protocol import recipe as recipe_module
from neobench.protocol.validate import validate_all
from neobench.train import output
from neobench.train.finetune import FinetuneConfig, finetune
from neobench.train.inputs import resolve_recipe
from neobench.train.telemetry import TokenCountingCollator, read_curve

FINETUNE_DATA = SHARED / "data" / "finetune"
TINY = ["manifest=sample-local", "max_seq_length=64", "checkpoint_every=100"]


def config(model, output, *overrides, data_dir=FINETUNE_DATA, **kwargs) -> FinetuneConfig:
    return FinetuneConfig(
        model=str(model),
        output=str(output),
        overrides=list(overrides),
        data_dir=str(data_dir),
        device="cpu",
        **kwargs,
    )


def curve(folder) -> list[dict]:
    return read_curve(folder / "neobench_loss_curve.jsonl")


# ----------------------------------------------------------------- recipe, manifest, bad inputs


def test_every_shipped_recipe_manifest_and_profile_validates_offline():
    checked, problems = validate_all()
    assert problems == [] and "2 recipe(s)" in checked


def test_recipe_values_carry_sources_and_overrides_change_the_hash(tmp_path):
    base = resolve_recipe(config("m", tmp_path))
    values = base.values
    assert values.max_steps == 2000 and values.temperature == 0.07 and values.batch_size == 128
    assert set(base.sources.values()) == {"paper", "authors-code", "neobench"}
    changed = resolve_recipe(config("m", tmp_path, "max_steps=40", "datasets=STSBENCHMARK"))
    assert changed.values.max_steps == 40 and changed.values.datasets == ["STSBENCHMARK"]
    assert changed.overrides == {"max_steps": 40, "datasets": ["STSBENCHMARK"]}
    assert changed.sha256 != base.sha256
    assert (
        resolve_recipe(config("m", tmp_path, seed=5)).sha256 == base.sha256
    )  # seed: reported apart
    # The run card says which values were overridden, with the recipe's own beside them.
    values = changed.record()["values"]
    assert values["max_steps"] == {
        "value": 40,
        "source": "override",
        "recipe_value": 2000,
        "recipe_source": "paper",
    }
    assert values["temperature"] == {"value": 0.07, "source": "paper"}


def test_shipped_recipe_hash_is_the_one_of_the_untyped_recipe():
    """The hash from the files alone: the canonical JSON of the recipe file's values, without
    the keys that change neither the method nor the numbers, and without dev_rows at 0 (an
    opt-in key added later: off, it leaves the hash as it was), and the revision of every row
    of its manifest (the data)."""
    path = Path(recipe_module._recipes_dir()) / "neobert-mteb-2k.yaml"
    data = yaml.safe_load(path.read_text())
    assert data["values"]["dev_rows"]["value"] == 0
    assert data["values"]["datasets"]["value"] == "all"
    manifest = yaml.safe_load((REPO / "datasets_manifest" / f"{data['manifest']}.yaml").read_text())
    values = {
        k: spec["value"]
        for k, spec in data["values"].items()
        if k not in {"seed", "checkpoint_every", "keep_checkpoints", "dev_rows"}
    }
    canonical = json.dumps(
        {
            "name": data["name"],
            "version": data["version"],
            "manifest": data["manifest"],
            "values": values,
            "revisions": {key: spec["revision"] for key, spec in manifest["datasets"].items()},
        },
        sort_keys=True,
    )
    expected = hashlib.sha256(canonical.encode()).hexdigest()
    assert recipe_module.load_recipe("neobert-mteb-2k").sha256 == expected


def test_a_recipe_file_reports_every_problem_at_once(tmp_path):
    path = Path(recipe_module._recipes_dir()) / "neobert-mteb-2k.yaml"
    data = yaml.safe_load(path.read_text())
    values = data["values"]
    values["max_steps"]["value"] = "many"  # wrong type
    values["learning_rat"] = {"value": 1e-4, "source": "paper"}  # unknown key
    del values["temperature"]  # missing key
    values["warmup_ratio"]["value"] = 1.5  # out of range
    values["similarity"]["value"] = "dot"  # a value this version does not implement
    values["max_grad_norm"]["value"] = 2  # an int where a float is expected: fine
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(data))
    with pytest.raises(NeobenchError) as error:
        recipe_module.load_recipe(str(broken))
    problems = error.value.problems
    expected = [
        "recipe value max_steps='many': expected int.",
        "Unknown recipe key 'learning_rat'. Did you mean 'learning_rate'?",
        "missing recipe key 'temperature'",
        "recipe value warmup_ratio=1.5 is out of range (it must be in [0, 1)).",
        "recipe value similarity='dot': this neobench version implements 'cosine' only.",
    ]
    for text in expected:
        assert sum(text in p for p in problems) == 1, (text, problems)
    assert len(problems) == len(expected) and all(p.startswith("broken.yaml: ") for p in problems)


def test_overrides_are_read_as_the_type_of_their_key(tmp_path):
    recipe = resolve_recipe(
        config("m", tmp_path, "learning_rate=1", "keep_checkpoints=TRUE", "max_seq_length=64")
    )
    assert recipe.values.learning_rate == 1.0 and isinstance(recipe.values.learning_rate, float)
    assert recipe.values.keep_checkpoints is True and recipe.values.max_seq_length == 64
    assert recipe.overrides == {
        "learning_rate": 1.0,
        "keep_checkpoints": True,
        "max_seq_length": 64,
    }
    with pytest.raises(NeobenchError) as error:
        resolve_recipe(
            config("m", tmp_path, "keep_checkpoints=yes", "similarity=dot", "max_steps=1.5")
        )
    assert error.value.problems == [
        "override keep_checkpoints=yes: expected true or false.",
        "recipe value similarity='dot': this neobench version implements 'cosine' only.",
        "override max_steps=1.5: expected a int like 2000.",
    ]


def test_a_finetune_card_written_before_the_typed_card_still_loads(tmp_path):
    """A card of an earlier version: sections missing, one unknown key. Missing keys read as
    their defaults; the unknown one is kept and written back."""
    old = {
        "kind": "neobench finetune",
        "started": "2026-01-01T00:00:00+00:00",
        "status": "complete",
        "recipe": {"name": "neobert-mteb-2k", "sha256": "abc"},
        "output_model": {"name": "neobench/tuned"},  # no recipe_sha256 yet
        "model": {"base": "m", "pooling": "mean"},
        "steps": 20,
        "old_section": {"kept": True},
    }
    folder = tmp_path / "tuned"
    folder.mkdir()
    write_card(folder / "neobench_run_card.yaml", old)
    card = record.read_finetune_card(folder / "neobench_run_card.yaml")
    assert card.status == "complete" and card.steps == 20 and card.final_loss is None
    assert card.model.base == "m" and card.model.revision is None and card.data == {}
    assert card.instructions.train_profile is None and card.extra == {"old_section": {"kept": True}}
    tuned = record.finetuned_model(folder)
    assert tuned is not None and (tuned.name, tuned.recipe_sha256) == ("neobench/tuned", None)
    assert record.finetuned_model(tmp_path) is None  # no card: not a neobench fine-tune
    record.write_finetune_card(folder / "neobench_run_card.yaml", card)
    again = yaml.safe_load((folder / "neobench_run_card.yaml").read_text())
    assert again["old_section"] == {"kept": True} and again["steps"] == 20


def test_a_running_card_has_no_ending_keys(tmp_path):
    path = tmp_path / "card.yaml"
    card = record.FinetuneCard(started="t0", status="running", seed=0)
    record.write_finetune_card(path, card)
    keys = list(yaml.safe_load(path.read_text()))
    assert keys[:3] == ["kind", "started", "status"] and keys[-1] == "environment"
    card.status, card.finished, card.steps = "complete", "t1", 2
    record.write_finetune_card(path, card)
    keys = list(yaml.safe_load(path.read_text()))
    assert keys[-4:] == ["finished", "steps", "final_loss", "checkpoints"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["max_step=40"], "Unknown recipe key 'max_step'. Did you mean 'max_steps'"),
        (["max_steps=forty"], "expected a int like 2000"),
        (["no_such_key=1", "batch_size=0"], "Unknown recipe key 'no_such_key'"),
        (["datasets=ALLNLLI"], "Did you mean 'ALLNLI'"),
        (["temperature=-1"], "temperature=-1.0 is out of range"),
        # numpy cannot seed with it: refused before anything starts, not a traceback later
        (["seed=-5"], r"seed=-5 is out of range \(it must be in \[0, 4294967296\)\)"),
        # one query and no hard negative: InfoNCE has nothing to rank, the loss is 0 throughout
        (["datasets=STSBENCHMARK", "batch_size=1"], "batch_size=1 with STSBENCHMARK"),
        (["datasets=ALLNLI", "batch_size=1", "max_hard_negatives=0"], "max_hard_negatives=0"),
    ],
)
def test_bad_overrides_are_clear(tmp_path, minilm, overrides, message):
    with pytest.raises(NeobenchError, match=message):
        finetune(config(minilm, tmp_path / "out", *overrides))
    assert not (tmp_path / "out").exists()


def test_dataset_missing_in_the_mirror(tmp_path, minilm, mirror):
    with pytest.raises(NeobenchError) as error:
        finetune(config(minilm, tmp_path / "out", "datasets=ALLNLI,STSBENCHMARK", data_dir=mirror))
    text = str(error.value)
    assert "dataset ALLNLI needs repo 'sentence-transformers/all-nli'" in text
    assert "neobench data prefetch --recipe neobert-mteb-2k" in text and "STSBENCHMARK" not in text


def test_manifest_row_with_columns_that_do_not_exist(tmp_path, minilm):
    manifest = tmp_path / "broken.yaml"
    manifest.write_text(
        "name: broken\ndatasets:\n  SNLI:\n    data_files: snli_triplets_dev_test.parquet\n"
        "    query: premise\n    positive: positive\n    licence: CC BY-SA 4.0\n"
        "    instruction: ALLNLI\n    source: neobench\n"
    )
    with pytest.raises(
        NeobenchError, match=r"column\(s\) \['premise'\] do not exist .* has \['query'"
    ):
        finetune(config(minilm, tmp_path / "out", f"manifest={manifest}", "batch_size=8"))


def test_dataset_too_small_for_one_global_batch(tmp_path, minilm):
    with pytest.raises(
        NeobenchError, match="AGNEWS has 627 usable rows, fewer than one global batch"
    ):
        finetune(
            config(
                minilm,
                tmp_path / "out",
                "manifest=sample-local",
                "datasets=AGNEWS",
                "batch_size=1000",
            )
        )


def test_existing_output_is_never_overwritten(tmp_path, minilm):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(NeobenchError, match="already exists and is not empty"):
        finetune(config(minilm, tmp_path / "out", *TINY))
    with pytest.raises(NeobenchError, match="holds no checkpoint"):
        finetune(config(minilm, tmp_path / "out", *TINY, resume=True))
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_instruction_reaches_the_query_and_not_the_documents(tiny_bert):
    model = SentenceTransformer(str(tiny_bert), device="cpu")
    instruction = "Given a premise, retrieve a hypothesis that is entailed by the premise. "
    collator = TokenCountingCollator(
        preprocess_fn=model.preprocess, prompts={"SNLI": {"query": instruction}}
    )
    features = [
        {
            "dataset_name": "SNLI",
            "query": "A man plays.",
            "positive": "Someone plays.",
            "negative_1": "Nobody moves.",
        }
    ]
    batch = collator(features)
    decode = model.tokenizer.decode
    assert instruction.lower().strip() in decode(batch["query_input_ids"][0])
    for column in ("positive", "negative_1"):
        assert "premise" not in decode(batch[f"{column}_input_ids"][0])
    assert collator.tokens == int(
        sum(batch[k].sum() for k in batch if k.endswith("_attention_mask"))
    )


# ----------------------------------------------------------------- real runs (CPU)

pytestmark_slow = pytest.mark.slow


@pytest.mark.slow
def test_smoke_minilm_on_real_pairs_and_triplets(tmp_path, minilm, mirror):
    out = tmp_path / "tuned"
    summary = finetune(
        config(
            minilm,
            out,
            "manifest=sample-local",
            "datasets=SNLI,AGNEWS",
            "max_steps=30",
            "batch_size=16",
            "max_seq_length=128",
            "checkpoint_every=15",
            "learning_rate=5e-5",
        )
    )
    rows = curve(out)
    assert summary.steps == 30 and [r["step"] for r in rows] == list(range(1, 31))
    for name in ("SNLI", "AGNEWS"):  # loss goes down on each dataset
        losses = [r["loss"] for r in rows if r["dataset"] == name]
        half = len(losses) // 2
        assert np.mean(losses[half:]) < np.mean(losses[:half]), name
    model = SentenceTransformer(str(out), device="cpu")
    assert model.encode(["a sentence"]).shape == (1, 384)
    assert model.prompts["SciFact-query"].startswith("Given a scientific claim")
    card = (out / "neobench_run_card.yaml").read_text()
    for field in (
        "recipe",
        "sha256",
        "overrides",
        "rows_raw",
        "fingerprint",
        "git_sha",
        "world_size",
        "attn_implementation",
        "seed",
    ):
        assert field in card
    assert (out / "neobench_loss_curve.png").stat().st_size > 5_000

    from neobench.evaluation.runner import EvalConfig, run_eval

    result = run_eval(
        EvalConfig(
            model=str(out),
            tasks=["BIOSSES"],
            data_dir=str(mirror),
            results=str(tmp_path / "res"),
            device="cpu",
        )
    )
    assert result.outcomes[0].status == "evaluated" and result.outcomes[0].main_score > 0.5
    eval_card = next((tmp_path / "res").rglob("run-*.yaml")).read_text()
    assert f"recipe_sha256: {summary.recipe_sha256}" in eval_card
    assert "name: neobench/tuned" in eval_card


@pytest.mark.slow
def test_real_manifest_offline_on_the_sample_mirror(tmp_path, tiny_bert, mirror):
    # The rows kept and the dataset drawn do not depend on the model nor on the number of steps.
    out = tmp_path / "sts"
    summary = finetune(
        config(
            tiny_bert, out, "datasets=STSBENCHMARK", "max_steps=2", "batch_size=16", data_dir=mirror
        )
    )
    assert summary.steps == 2 and summary.datasets == {"STSBENCHMARK": 1406}  # score >= 4 kept
    assert {r["dataset"] for r in curve(out)} == {"STSBENCHMARK"}


# The same losses and embeddings on one or two processes: tests/test_finetune_signals.py, test_a_
# distributed_fine_tune_stops_on_slurms_notice_and_resumes_to_the_same_losses (its two-process run,
# stopped and resumed, ends with the one-process run's datasets, losses and embeddings).


class StopAt:
    """Simulates a kill right after a step (the checkpoint of step 3 is already on disk)."""

    def __init__(self, step):
        self.step = step

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_resume_ends_with_the_same_weights(tmp_path, tiny_bert):
    overrides = [*TINY[:2], "max_steps=6", "batch_size=8", "checkpoint_every=3"]
    finetune(config(tiny_bert, tmp_path / "full", *overrides))
    # A completed run keeps the model, not its checkpoints (weights + optimizer state).
    assert not (tmp_path / "full" / "checkpoints").exists()
    assert not list((tmp_path / "full").rglob("optimizer.pt"))
    with pytest.raises(KeyboardInterrupt):
        finetune(config(tiny_bert, tmp_path / "cut", *overrides), extra_callbacks=[StopAt(4)])
    assert (tmp_path / "cut" / "checkpoints" / "checkpoint-3").is_dir()
    finetune(config(tiny_bert, tmp_path / "cut", *overrides, resume=True))
    # --resume of a complete run (a requeued cluster job that finished as its notice came):
    # nothing to run, exit 0, the folder untouched.
    weights = (tmp_path / "cut" / "model.safetensors").read_bytes()
    code = cmd_finetune(config(tiny_bert, tmp_path / "cut", *overrides, resume=True))
    assert code == 0 and (tmp_path / "cut" / "model.safetensors").read_bytes() == weights
    full = SentenceTransformer(str(tmp_path / "full"), device="cpu").state_dict()
    cut = SentenceTransformer(str(tmp_path / "cut"), device="cpu").state_dict()
    assert full.keys() == cut.keys()
    assert max((full[k] - cut[k]).abs().max().item() for k in full) < 1e-6
    assert [r["loss"] for r in curve(tmp_path / "cut")] == pytest.approx(
        [r["loss"] for r in curve(tmp_path / "full")], rel=1e-6
    )


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["no_trainer_state", "weights_cut_short"])
def test_resume_skips_a_checkpoint_that_is_not_whole(tmp_path, tiny_bert, damage):
    """A kill (or a full disk) while checkpoint-6 is written leaves it partial: --resume names
    it, sets it aside and continues from checkpoint-3, ending where an uninterrupted run ends."""
    overrides = [*TINY[:2], "max_steps=9", "batch_size=8", "checkpoint_every=3"]
    finetune(config(tiny_bert, tmp_path / "full", *overrides))
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        finetune(config(tiny_bert, cut, *overrides), extra_callbacks=[StopAt(4)])
    whole = cut / "checkpoints" / "checkpoint-3"
    assert (whole / "neobench_checkpoint.json").is_file()  # marked once written
    partial = cut / "checkpoints" / "checkpoint-6"
    shutil.copytree(whole, partial)
    if damage == "no_trainer_state":  # killed before the trainer wrote its state (last file)
        (partial / "neobench_checkpoint.json").unlink()
        (partial / "trainer_state.json").unlink()
    else:  # marked, then a file cut short (a copy interrupted, a disk filled)
        weights = next(partial.rglob("model.safetensors"))
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert output.last_checkpoint(cut) == str(whole)
    finetune(config(tiny_bert, cut, *overrides, resume=True))
    full = SentenceTransformer(str(tmp_path / "full"), device="cpu").state_dict()
    done = SentenceTransformer(str(cut), device="cpu").state_dict()
    assert max((full[k] - done[k]).abs().max().item() for k in full) < 1e-6
    assert [r["loss"] for r in curve(cut)] == pytest.approx(
        [r["loss"] for r in curve(tmp_path / "full")], rel=1e-6
    )


@pytest.mark.slow
def test_non_finite_loss_stops_with_step_and_dataset(tmp_path, tiny_bert):
    out = tmp_path / "nan"
    with pytest.raises(
        NeobenchError,
        match=r"at step 3 on dataset SNLI\. The last good checkpoint is .*checkpoint-2",
    ):
        finetune(
            config(
                tiny_bert,
                out,
                *TINY[:2],
                "max_steps=8",
                "batch_size=8",
                "checkpoint_every=2",
                "learning_rate=1e30",
            )
        )
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-2"]
    assert torch.isfinite(torch.tensor([r["loss"] for r in curve(out)])).all()


def test_unknown_recipe_name_suggests(tmp_path, minilm):
    with pytest.raises(
        NeobenchError, match=r"Unknown recipe 'neobert-mteb-2kk'\. Did you mean 'neobert-mteb-2k'"
    ):
        finetune(
            FinetuneConfig(model=str(minilm), output=str(tmp_path / "o"), recipe="neobert-mteb-2kk")
        )


@pytest.mark.slow
def test_gradcache_mode_gives_the_same_losses(tmp_path, tiny_bert):
    common = [*TINY[:2], "max_steps=3", "batch_size=8"]
    finetune(config(tiny_bert, tmp_path / "plain", *common))
    finetune(config(tiny_bert, tmp_path / "cached", *common, "gradcache_mini_batch=3"))
    plain, cached = curve(tmp_path / "plain"), curve(tmp_path / "cached")
    assert [r["loss"] for r in cached] == pytest.approx([r["loss"] for r in plain], rel=1e-4)


@pytest.mark.slow
def test_instructions_none_trains_without_instructions(tmp_path, tiny_bert):
    # The 'none' training profile is empty on purpose: no manifest row needs an instruction.
    out = tmp_path / "plain"
    summary = finetune(
        config(tiny_bert, out, *TINY[:2], "max_steps=2", "batch_size=8", "instructions=none")
    )
    assert summary.steps == 2
    card = yaml.safe_load((out / "neobench_run_card.yaml").read_text())
    assert card["instructions"]["train_profile"] == "none"
    assert card["recipe"]["values"]["instructions"]["source"] == "override"
