"""Native NeoBERT against the authors' reference outputs (../shared/fixtures/neobert-tiny)."""

import pytest
import torch
from conftest import SHARED
from safetensors.torch import load_file

from neobench.models import register
from neobench.models.neobert import NeoBERT, NeoBERTConfig, varlen_reference

register()  # model_type "neobert" for transformers' Auto classes

FIXTURE = SHARED / "fixtures" / "neobert-tiny"
TOL = {"atol": 1e-5, "rtol": 1e-4}


@pytest.fixture(scope="module")
def io():
    return load_file(str(FIXTURE / "io.safetensors"))


@pytest.fixture(scope="module")
def encoder():
    from transformers import AutoModel

    model, info = AutoModel.from_pretrained(
        str(FIXTURE), output_loading_info=True, trust_remote_code=False
    )
    assert info["missing_keys"] == set() or info["missing_keys"] == []
    return model.eval()


def test_auto_model_is_native_and_strict(encoder):
    assert isinstance(encoder, NeoBERT)
    assert list(encoder.buffers()) == []  # RoPE is computed, never loaded
    names = {n for n, _ in encoder.named_parameters()}
    assert (
        "transformer_encoder.0.qkv.weight" in names
        and "transformer_encoder.1.ffn.w12.weight" in names
    )


def test_hidden_states_and_mean_pooling_match_the_reference(encoder, io):
    mask = io["attention_mask"].bool()
    with torch.no_grad():
        hidden = encoder(io["input_ids"], attention_mask=io["attention_mask"]).last_hidden_state
    torch.testing.assert_close(hidden[mask], io["expected_last_hidden_state"][mask], **TOL)
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    torch.testing.assert_close(pooled, io["expected_mean_pooled"], **TOL)
    assert torch.isfinite(hidden).all()  # padded positions too: no NaN after loading


def test_mlm_head_matches_the_reference(io):
    from transformers import AutoModelForMaskedLM

    model, info = AutoModelForMaskedLM.from_pretrained(str(FIXTURE), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        logits = model.eval()(io["input_ids"][:1], attention_mask=io["attention_mask"][:1]).logits[
            0
        ]
    torch.testing.assert_close(logits, io["expected_mlm_logits"], **TOL)


def test_unpadded_path_equals_padded_path_on_real_tokens(encoder, io):
    mask = io["attention_mask"].bool()
    with torch.no_grad():
        padded = encoder(io["input_ids"], attention_mask=io["attention_mask"]).last_hidden_state
        encoder.config.unpadded_attention = "on"
        try:
            unpadded = encoder(
                io["input_ids"], attention_mask=io["attention_mask"]
            ).last_hidden_state
        finally:
            encoder.config.unpadded_attention = "auto"
    torch.testing.assert_close(unpadded[mask], padded[mask], **TOL)
    assert (unpadded[~mask] == 0).all()


def test_varlen_reference_is_attention_within_each_sequence():
    torch.manual_seed(0)
    q, k, v = (torch.randn(9, 2, 8) for _ in range(3))
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    out = varlen_reference(q, k, v, cu)
    first = torch.softmax(
        q[:4].transpose(0, 1) @ k[:4].transpose(0, 1).transpose(1, 2) / 8**0.5, -1
    )
    torch.testing.assert_close(out[:4], (first @ v[:4].transpose(0, 1)).transpose(0, 1))


def test_token_type_ids_are_accepted_and_ignored(encoder, io):
    with torch.no_grad():
        a = encoder(io["input_ids"], attention_mask=io["attention_mask"]).last_hidden_state
        b = encoder(
            io["input_ids"],
            attention_mask=io["attention_mask"],
            token_type_ids=torch.ones_like(io["input_ids"]),
        ).last_hidden_state
    assert torch.equal(a, b)


def test_bf16_forward_is_finite_and_close(encoder, io):
    mask = io["attention_mask"].bool()
    model = NeoBERT(encoder.config).to(torch.bfloat16)
    model.load_state_dict({k: v.to(torch.bfloat16) for k, v in encoder.state_dict().items()})
    with torch.no_grad():
        hidden = model.eval()(
            io["input_ids"], attention_mask=io["attention_mask"]
        ).last_hidden_state
    assert torch.isfinite(hidden).all()
    assert (hidden.float()[mask] - io["expected_last_hidden_state"][mask]).abs().max() < 0.1


@pytest.mark.gpu
def test_cuda_unpadded_equals_padded(io):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(FIXTURE)).cuda().eval()
    ids, attention = io["input_ids"].cuda(), io["attention_mask"].cuda()
    mask = attention.bool()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        model.config.unpadded_attention = "off"
        padded = model(ids, attention_mask=attention).last_hidden_state.float()
        model.config.unpadded_attention = "on"
        unpadded = model(ids, attention_mask=attention).last_hidden_state.float()
    assert (padded[mask] - unpadded[mask]).abs().max() < 2e-2
    assert (padded[mask] - io["expected_last_hidden_state"].cuda()[mask]).abs().max() < 5e-2


@pytest.fixture(scope="module")
def tiny_neobert(tmp_path_factory):
    """A tiny NeoBERT built from a config (random weights) with the fixture's tokenizer."""
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-neobert")
    config = NeoBERTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=96,
        max_length=512,
    )
    NeoBERT(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(FIXTURE)).save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_finetune_and_eval_a_tiny_neobert_on_cpu(tiny_neobert, tmp_path, mirror):
    from neobench.evaluation.runner import EvalConfig, run_eval
    from neobench.train.finetune import FinetuneConfig, finetune

    out = tmp_path / "tuned"
    summary = finetune(
        FinetuneConfig(
            model=str(tiny_neobert),
            output=str(out),
            data_dir=str(SHARED / "data" / "finetune"),
            device="cpu",
            overrides=["manifest=sample-local", "max_steps=4", "batch_size=8", "max_seq_length=64"],
        )
    )
    assert summary.steps == 4
    card = (out / "neobench_run_card.yaml").read_text()
    # --padding packed (the default): its own unpadded path, the reference kernel on the CPU
    assert "architecture: NeoBERT" in card and "mode: packed" in card
    assert "attn_implementation: varlen (per-sequence sdpa reference)" in card
    result = run_eval(
        EvalConfig(
            model=str(out),
            tasks=["BIOSSES"],
            data_dir=str(mirror),
            results=str(tmp_path / "res"),
            device="cpu",
        )
    )
    assert result.outcomes[0].status == "evaluated"
    assert -1.0 <= result.outcomes[0].main_score <= 1.0
