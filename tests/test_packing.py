"""`finetune --padding packed`: the training forwards run each column's real tokens only and give
padded's losses and gradients, per architecture (tiny models built from configs, 2 layers, 32
dims; real SNLI and SciFact pairs collated as the trainer collates them), through the recipe's
loss and its GradCache variant; a fine-tune records what ran, and why a run asked to pack did not.

Every backbone takes MiniLM's real WordPiece tokenizer (bert-base-uncased's vocabulary, NeoBERT's
own): packing depends on the masks, positions and windows, which the configs set, not on the
vocabulary.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import SHARED, benchmark_script
from safetensors.torch import load_file
from sentence_transformers.sentence_transformer.losses import (
    CachedMultipleNegativesRankingLoss,
    MultipleNegativesRankingLoss,
)
from sentence_transformers.util import cos_sim

from neobench.cli.main import main
from neobench.models import unpad
from neobench.models.load import load_model
from neobench.models.neobert import varlen_reference
from neobench.protocol.config import STANDARD_RECIPE
from neobench.protocol.data import build_dataset
from neobench.protocol.instructions import load_train_instructions
from neobench.protocol.manifest import load_manifest
from neobench.protocol.recipe import load_recipe
from neobench.train import packing
from neobench.train.finetune import FinetuneConfig, finetune
from neobench.train.telemetry import TokenCountingCollator, real_tokens
from neobench.train.trainer import query_prompts

# Each test checks a library patch against the library's own path (tests/conftest.py).
pytestmark = pytest.mark.patches

FINETUNE = SHARED / "data" / "finetune"
# The unpadded tolerances of the evaluation tests (tests/test_neobert.py's TOL).
TOL = {"atol": 1e-5, "rtol": 1e-4}
REFERENCE = "varlen (per-sequence sdpa reference)"  # the packed kernel on the CPU
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
ROBERTA = {"max_position_embeddings": 514, "type_vocab_size": 1}
# Every backbone that packs: transformers' own (unpad.POSITIONS) and native NeoBERT.
BACKBONES = {
    "bert": {"max_position_embeddings": 512},
    "roberta": ROBERTA,
    "xlm-roberta": ROBERTA,
    "camembert": ROBERTA,
    "electra": {"embedding_size": 16},
    # The second layer is local (a window of 8 each side): longer texts cross it.
    "modernbert": {"global_attn_every_n_layers": 2, "local_attention": 16},
    "nomic_bert": {"max_position_embeddings": 512},
    "neobert": {},
}
LENGTH = 64  # SciFact's abstracts reach it; SNLI's sentences stay below
# 4 steps of the recipe, 8 queries each, on real SNLI triplets and SciFact pairs.
RUN = ["manifest=sample-local", "datasets=SNLI,SCIFACT", "max_steps=4", "batch_size=8"]
RUN += [f"max_seq_length={LENGTH}", "checkpoint_every=100"]


def test_every_backbone_that_packs_is_tested():
    assert set(BACKBONES) == {*unpad.POSITIONS, "neobert"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, minilm):
    """model_type -> a tiny HF folder of it (random weights, seeded), built on first use."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm)
    built: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type in built:
            return built[model_type]
        torch.manual_seed(0)
        folder = tmp_path_factory.mktemp(f"tiny-{model_type}")
        if model_type == "neobert":
            from neobench.models.neobert import NeoBERT, NeoBERTConfig

            config = NeoBERTConfig(**{**TINY, "intermediate_size": 96}, vocab_size=len(tokenizer))
            model = NeoBERT(config)
        else:
            special = {
                "pad_token_id": tokenizer.pad_token_id,
                **{f"{s}_token_id": tokenizer.cls_token_id for s in ("bos", "cls")},
                **{f"{s}_token_id": tokenizer.sep_token_id for s in ("eos", "sep")},
            }
            kwargs = {**TINY, **special, "vocab_size": len(tokenizer), **BACKBONES[model_type]}
            model = AutoModel.from_config(AutoConfig.for_model(model_type, **kwargs))
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        built[model_type] = folder
        return folder

    return get


@pytest.fixture(scope="module")
def datasets():
    """Two real rows of the sample manifest, as `finetune` builds them: SNLI triplets (short,
    three columns) and SciFact claims with their abstracts (long)."""
    rows = load_manifest("sample-local").rows
    return {key: build_dataset(rows[key], FINETUNE, 7) for key in ("SNLI", "SCIFACT")}


def collated(model, datasets) -> list[tuple[list[dict], int]]:
    """Each dataset's first 8 rows collated as the trainer does (the training instruction on
    the query side): per batch, one feature dict per column, and its real tokens."""
    values = load_recipe(STANDARD_RECIPE).values
    prompts = query_prompts(datasets, values, load_train_instructions(values.instructions))
    collator = TokenCountingCollator(preprocess_fn=model.preprocess, prompts=prompts)
    batches = []
    for key, built in datasets.items():
        columns = built.dataset.column_names
        batch = collator([{"dataset_name": key, **r} for r in built.dataset.select(range(8))])
        features = [
            {name[len(c) + 1 :]: v for name, v in batch.items() if name.startswith(f"{c}_")}
            for c in columns
        ]
        batches.append((features, real_tokens(batch)))
    return batches


def recipe_loss(model, mini_batch: int):
    """The recipe's InfoNCE (scale 1/temperature, cosine, query to documents), plain or in
    GradCache chunks of ``mini_batch`` texts."""
    values = load_recipe(STANDARD_RECIPE).values
    common = {
        "scale": 1.0 / values.temperature,
        "similarity_fct": cos_sim,
        "directions": (values.loss_direction,),
    }
    if mini_batch:
        return CachedMultipleNegativesRankingLoss(model, mini_batch_size=mini_batch, **common)
    return MultipleNegativesRankingLoss(model, **common)


def step(model, padding, loss, features, autocast=None) -> tuple[torch.Tensor, dict, int]:
    """One training forward (under ``autocast`` if given) and backward under ``padding``: the
    loss, every gradient, and the token positions the encoder's first linear layer ran (rows of
    its input)."""
    backbone = model[0].auto_model
    first = next(m for m in backbone.modules() if isinstance(m, torch.nn.Linear))
    rows = []
    hook = first.register_forward_hook(
        lambda m, inputs, out: rows.append(inputs[0][..., 0].numel())
    )
    model.train()
    model.zero_grad()
    try:
        with packing.applied(model, padding):
            with autocast or contextlib.nullcontext():
                value = loss([dict(f) for f in features], None)
            value.backward()
    finally:
        hook.remove()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return value.detach(), grads, sum(rows)


@pytest.mark.parametrize("model_type", list(BACKBONES))
def test_packed_losses_and_gradients_equal_padded(model_type, folders, datasets):
    """The plain loss and GradCache's (chunks of 5 texts: the model called per chunk)."""
    loaded = load_model(str(folders(model_type)), max_seq_length=LENGTH, disable_dropout=True)
    model = loaded.model
    packed = packing.choose("packed", loaded, "cpu", half=False)
    padded = packing.choose("padded", loaded, "cpu", half=False)
    assert packed.packed and packed.attention == REFERENCE and not padded.packed
    batches = collated(model, datasets)
    largest = {}  # loss, plain / GradCache -> the largest difference, as -s prints it
    for mini_batch in (0, 5):
        loss = recipe_loss(model, mini_batch)
        for features, real in batches:
            loss_padded, grads_padded, positions_padded = step(model, padded, loss, features)
            loss_packed, grads_packed, positions_packed = step(model, packed, loss, features)
            torch.testing.assert_close(loss_packed, loss_padded, **TOL)
            assert grads_packed.keys() == grads_padded.keys() and grads_padded
            torch.testing.assert_close(grads_packed, grads_padded, **TOL)
            name = "gradcache" if mini_batch else "plain"
            gaps = [(grads_packed[n] - g).abs().max().item() for n, g in grads_padded.items()]
            for what, gap in (
                ("loss", (loss_packed - loss_padded).abs().item()),
                ("grad", max(gaps)),
            ):
                largest[f"{what} {name}"] = max(largest.get(f"{what} {name}", 0.0), gap)
            # Packed, the encoder runs the real tokens only (GradCache embeds twice: without
            # and with gradients); padded, the layout step_positions describes.
            assert positions_packed == (2 if mini_batch else 1) * real
            if not mini_batch:
                lengths = [f["attention_mask"].sum(dim=1).tolist() for f in features]
                assert positions_padded == packing.step_positions(lengths).padded > real
    print(model_type, "packed - padded:", {k: f"{v:.1e}" for k, v in largest.items()})
    # The backbone is as loaded again: its own forward, NeoBERT's switch back at "auto".
    assert "forward" not in vars(model[0].auto_model)
    assert getattr(model[0].auto_model.config, "unpadded_attention", "auto") == "auto"


@pytest.mark.slow
@pytest.mark.parametrize("model_type", list(BACKBONES))
def test_finetune_packed_equals_padded_and_the_card_says_which_ran(model_type, folders, tmp_path):
    runs = {}
    for padding in ("padded", "packed"):
        out = tmp_path / padding
        summary = finetune(
            FinetuneConfig(
                model=str(folders(model_type)),
                output=str(out),
                data_dir=str(FINETUNE),
                device="cpu",
                padding=padding,
                overrides=RUN,
            ),
            progress=False,
        )
        card = yaml.safe_load((out / "neobench_run_card.yaml").read_text())
        runs[padding] = (summary, summary.to_pandas(), card, load_file(out / "model.safetensors"))
    (summary_a, curve_a, card_a, weights_a), (summary_b, curve_b, card_b, weights_b) = (
        runs["padded"],
        runs["packed"],
    )
    assert summary_a.recipe_sha256 == summary_b.recipe_sha256  # --padding is not the recipe
    assert list(curve_a["dataset"]) == list(curve_b["dataset"]) and len(curve_b) == 4
    for column in ("loss", "grad_norm"):
        np.testing.assert_allclose(curve_b[column], curve_a[column], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights_b, weights_a, **TOL)
    gaps = {c: float(np.abs(curve_b[c] - curve_a[c]).max()) for c in ("loss", "grad_norm")}
    gaps["weights"] = max((weights_b[k] - w).abs().max().item() for k, w in weights_a.items())
    print(model_type, "4 steps, packed - padded:", {k: f"{v:.1e}" for k, v in gaps.items()})
    packer = packing.NATIVE if model_type == "neobert" else packing.PATCH
    assert card_b["padding"] == {
        "requested": "packed", "mode": "packed", "attention": REFERENCE, "packer": packer,
    }  # fmt: skip
    padded_kernel = "sdpa (padded, key mask)" if model_type == "neobert" else "sdpa"
    assert card_a["padding"] == {
        "requested": "padded", "mode": "padded", "attention": padded_kernel,
    }  # fmt: skip
    assert card_b["model"]["attn_implementation"] == REFERENCE
    assert card_a["model"]["attn_implementation"] == padded_kernel
    assert card_b["config"]["padding"] == "packed"
    # The saved model keeps the switch it was loaded with (NeoBERT's), not the training one.
    saved = json.loads((tmp_path / "packed" / "config.json").read_text())
    assert saved.get("unpadded_attention", "auto") == "auto"


@pytest.mark.gpu
@pytest.mark.parametrize("model_type", ["bert", "modernbert", "neobert"])
def test_cuda_packed_training_matches_padded_under_bf16(model_type, folders, datasets):
    """Opt-in (-m gpu): the fused varlen kernels (flash-attn's or torch's varlen_attn) train
    under the recipe's bf16 autocast: finite, and padded's loss and gradients to bf16's
    precision."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    folder = str(folders(model_type))
    loaded = load_model(folder, max_seq_length=LENGTH, device="cuda", disable_dropout=True)
    model = loaded.model
    packed = packing.choose("packed", loaded, "cuda", half=True)
    padded = packing.choose("padded", loaded, "cuda", half=True)
    assert packed.packed and "reference" not in packed.attention
    loss = recipe_loss(model, 0)
    for features, real in collated(model, datasets):
        on_device = [
            {k: v.cuda() if torch.is_tensor(v) else v for k, v in f.items()} for f in features
        ]
        runs = [
            step(model, p, loss, on_device, torch.autocast("cuda", torch.bfloat16))
            for p in (padded, packed)
        ]
        (loss_a, grads_a, _), (loss_b, grads_b, positions) = runs
        assert positions == real and torch.isfinite(loss_b)
        assert abs(loss_b.item() - loss_a.item()) < 2e-2 * max(1.0, abs(loss_a.item()))
        flat_a = torch.cat([g.float().flatten() for g in grads_a.values()])
        flat_b = torch.cat([grads_b[n].float().flatten() for n in grads_a])
        assert torch.isfinite(flat_b).all()
        assert torch.nn.functional.cosine_similarity(flat_a, flat_b, dim=0) > 0.99


def test_with_the_patch_gate_off_a_packed_request_trains_padded_and_says_why(
    folders, datasets, monkeypatch
):
    """The "unpadded-attention" patch off (NEOBENCH_PATCHES, or untested library versions):
    transformers' encoders train as shipped, padded, and the card's padding says why; native
    NeoBERT packs in its own code, patch or not."""
    monkeypatch.setenv("NEOBENCH_PATCHES", "unpadded-attention")
    bert = load_model(str(folders("bert")), max_seq_length=LENGTH, disable_dropout=True)
    padding = packing.choose("packed", bert, "cpu", half=False)
    assert padding.record() == {
        "requested": "packed",
        "mode": "padded",
        "attention": "sdpa",
        "why": "the library patch unpadded-attention is off (NEOBENCH_PATCHES=unpadded-attention)",
    }
    features, real = collated(bert.model, datasets)[0]
    _, _, positions = step(bert.model, padding, recipe_loss(bert.model, 0), features)
    assert positions > real  # padded positions ran
    neobert = load_model(str(folders("neobert")), max_seq_length=LENGTH, disable_dropout=True)
    assert packing.choose("packed", neobert, "cpu", half=False).packer == packing.NATIVE


def test_dropout_or_a_backbone_that_cannot_pack_trains_padded_and_says_why(folders, tmp_path):
    with_dropout = load_model(str(folders("bert")), max_seq_length=LENGTH)  # BERT's own 0.1
    why = packing.choose("packed", with_dropout, "cpu", half=False).why
    assert "hidden_dropout_prob=0.1" in why and "attention_probs_dropout_prob=0.1" in why
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    folder = tmp_path / "distilbert"
    config = DistilBertConfig(vocab_size=30522, dim=32, n_layers=2, n_heads=2, hidden_dim=64)
    DistilBertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(folders("bert")).save_pretrained(folder)
    distil = load_model(str(folder), max_seq_length=LENGTH, disable_dropout=True)
    padding = packing.choose("packed", distil, "cpu", half=False)
    assert padding.mode == "padded" and padding.why.startswith("DistilBertModel (model_type")


def test_a_bad_padding_value_is_named_before_anything_loads(minilm, tmp_path, capsys):
    code = main([
        "finetune", "--model", str(minilm), "--output", str(tmp_path / "out"),
        "--data-dir", str(FINETUNE), "--padding", "packd", "manifest=sample-local",
    ])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err
    assert "--padding value 'packd'" in err and "Did you mean 'packed'" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("window", [None, 2])
def test_the_cpu_varlen_reference_is_differentiable(window):
    """Training packed needs gradients through the reference kernel: checked against finite
    differences in float64, local (banded) attention included."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(7, 1, 2, dtype=torch.float64, requires_grad=True) for _ in range(3))
    cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    assert torch.autograd.gradcheck(lambda *t: varlen_reference(*t, cu, None, window), (q, k, v))


def test_step_positions_lay_a_step_out_as_the_padded_losses_do():
    # 2 queries (3, 5 tokens); positives (4, 2) and one negative column (7, 1): the candidates
    # run merged, 4 rows padded to 7.
    positions = packing.step_positions([[3, 5], [4, 2], [7, 1]])
    assert (positions.real, positions.padded) == (22, 2 * 5 + 4 * 7)
    assert positions.padding_share == pytest.approx(1 - 22 / 38)


def test_real_tokens_of_a_flattened_batch_count_its_ids(minilm):
    """sentence-transformers flattens a column (no mask, no padding) for flash_attention_2:
    every id is a real token."""
    from transformers import AutoTokenizer, DataCollatorWithFlattening

    tokenizer = AutoTokenizer.from_pretrained(minilm)
    texts = ["A man plays a guitar.", "short", "Two dogs run across a field of grass."]
    flat = DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_position_ids=True)(
        [{"input_ids": tokenizer(t)["input_ids"]} for t in texts]
    )
    padded = tokenizer(texts, padding=True, return_tensors="pt")
    batch = {f"query_{k}": v for k, v in flat.items()}
    batch.update({f"positive_{k}": v for k, v in padded.items()})
    lengths = [len(tokenizer(t)["input_ids"]) for t in texts]
    assert real_tokens(batch) == 2 * sum(lengths)


def test_the_padding_share_benchmark_measures_the_rows_here_and_names_the_rest(mirror):
    shares = benchmark_script("padding_share")
    sample = {s.key: s for s in shares.measure("sample-local", FINETUNE, steps=2)}
    assert set(sample) == set(load_manifest("sample-local").rows)
    snli = sample["SNLI"]
    assert snli.missing is None and snli.steps == 2 and snli.texts_per_step == 128 * 3
    assert all(0 < r < p for r, p in zip(snli.real, snli.padded, strict=True))
    assert shares.run_share(list(sample.values()), 0.5) is not None
    standard = {s.key: s for s in shares.measure("neobert-mteb", mirror, steps=1)}
    assert standard["STSBENCHMARK"].missing is None and standard["STSBENCHMARK"].steps == 1
    assert str(mirror / "mteb/fever") in standard["FEVER"].missing
    assert "does not build" in standard["STS12"].missing  # its mirror holds the test split only
    assert shares.run_share(list(standard.values()), 0.5) is None
