"""Unpadded encoding for transformers' encoders: packed real tokens give the padded numbers."""

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer
from transformers import AutoConfig, AutoModel

from neobench.cli.main import main
from neobench.encoder.encode import FastEncoder, resolve_dtype
from neobench.models import unpad
from neobench.models.load import load_model

# Each test checks a library patch against the library's own path (tests/conftest.py).
pytestmark = pytest.mark.patches

TINY = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "vocab_size": 100,
    "pad_token_id": 1,
    "local_attention": 4,  # ModernBERT: its second layer is local (window of 2 each side)
}


def _batch(pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 90, (3, 20), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 13:] = 0
    mask[2, 3:] = 0
    return ids.masked_fill(mask == 0, pad_id), mask


@pytest.mark.parametrize("model_type", sorted(unpad.POSITIONS))
def test_packed_equals_padded_for_every_listed_architecture(model_type):
    torch.manual_seed(0)
    model = AutoModel.from_config(
        AutoConfig.for_model(model_type, **TINY), attn_implementation="sdpa"
    )
    model.eval()
    ids, mask = _batch(TINY["pad_token_id"])
    with torch.inference_mode():
        padded = model(input_ids=ids, attention_mask=mask).last_hidden_state
        packed = unpad.packed_forward(model.forward, model.config, ids, mask).last_hidden_state
    real = mask.bool()
    assert (padded[real] - packed[real]).abs().max() < 1e-5
    assert packed[~real].abs().max() == 0  # padding positions hold zeros (pooling ignores them)
    assert model.config._attn_implementation == "sdpa"  # restored afterwards


def test_modernbert_local_layers_keep_their_window():
    """Dropping the sliding window would change ModernBERT's outputs: the window is honoured."""
    torch.manual_seed(0)
    model = AutoModel.from_config(
        AutoConfig.for_model("modernbert", **TINY), attn_implementation="sdpa"
    )
    model.eval()
    ids, mask = _batch(TINY["pad_token_id"])
    with torch.inference_mode():
        padded = model(input_ids=ids, attention_mask=mask).last_hidden_state
        model.config.local_attention = 10_000  # effectively global
        for layer in model.layers:
            if layer.attn.sliding_window is not None:
                layer.attn.sliding_window = 10_000
        widened = unpad.packed_forward(model.forward, model.config, ids, mask).last_hidden_state
    assert (padded[mask.bool()] - widened[mask.bool()]).abs().max() > 1e-3


def test_minilm_unpadded_embeddings_equal_stock_encode(minilm, mirror):
    import pandas as pd

    corpus = pd.read_parquet(mirror / "mteb/scifact/corpus/corpus-00000-of-00001.parquet")["text"]
    texts = [*corpus.tolist()[:40], "short", "a b c", "one more sentence of medium length"]
    stock = SentenceTransformer(str(minilm), device="cpu")
    stock.max_seq_length = 256
    reference = stock.encode(texts, batch_size=16)
    loaded = load_model(str(minilm), max_seq_length=256, unpadded="on")
    assert loaded.packed and loaded.attn_implementation.startswith("varlen")
    fast = FastEncoder(loaded.model, "fp", None, token_budget=1024, packed=True)
    ours = fast.embed(texts, None)
    assert np.abs(ours - reference).max() < 1e-5
    assert fast.forward_calls > 1  # several packed batches, not one
    # The backbone is back to its padded forward after encoding.
    assert "forward" not in vars(loaded.model[0].auto_model)


def test_unpadding_is_off_on_cpu_by_default(minilm):
    assert not load_model(str(minilm), device="cpu").packed
    assert not load_model(str(minilm), device="cpu", unpadded="off").packed


def test_with_the_library_patch_off_the_model_runs_padded(minilm, monkeypatch):
    """Packing is the registry's "unpadded-attention" patch: off, --unpadded on loads a padded
    model (the card says so) and an encoder asked to pack leaves transformers as shipped."""
    monkeypatch.setenv("NEOBENCH_PATCHES", "unpadded-attention")
    loaded = load_model(str(minilm), max_seq_length=128, unpadded="on")
    assert not loaded.packed and not loaded.attn_implementation.startswith("varlen")
    with unpad.unpadded(loaded.model, enabled=True) as packs:
        assert packs is False and "forward" not in vars(loaded.model[0].auto_model)


def test_bad_dtype_and_unpadded_values_are_named(tiny_bert, mirror, capsys):
    code = main([
        "eval", "--model", str(tiny_bert), "--data-dir", str(mirror), "--tasks", "BIOSSES",
        "--dtype", "bfloat", "--unpadded", "yes",
    ])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert "--dtype value 'bfloat'" in err and "Did you mean" in err and "bfloat16" in err
    assert "--unpadded value 'yes'" in err and "Valid: auto, off, on" in err


def test_dtype_names():
    assert resolve_dtype("auto", "cpu") == "float32" and resolve_dtype("auto", "cuda") == "float16"
    assert resolve_dtype("bf16", "cuda") == "bfloat16" and resolve_dtype("fp16", "cpu") == "float16"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_varlen_kernel_matches_stock_encode(minilm, mirror, dtype):
    """Opt-in (-m gpu): torch's fused varlen kernel on real texts vs stock padded encode."""
    import pandas as pd

    corpus = pd.read_parquet(mirror / "mteb/scifact/corpus/corpus-00000-of-00001.parquet")["text"]
    texts = corpus.tolist()[:256]
    loaded = load_model(str(minilm), device="cuda", max_seq_length=512, unpadded="on")
    assert loaded.packed and "varlen" in loaded.attn_implementation
    with torch.autocast("cuda", dtype):
        reference = loaded.model.encode(texts, batch_size=32, convert_to_tensor=True).float()
    ours = FastEncoder(loaded.model, "fp", None, autocast=dtype, packed=True).embed(texts, None)
    cosine = torch.nn.functional.cosine_similarity(reference.cpu(), torch.as_tensor(ours))
    assert cosine.min() > 0.999
