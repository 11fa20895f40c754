"""The memory of a training step (models/memory.py): its byte counts are what autograd keeps, as
torch's saved-tensor hooks count them on tiny networks of each layout; its parameter counts are
the built networks'; its fit to the shipped H100 peaks; the GradCache chunk it chooses."""

from __future__ import annotations

import json
import math

import pytest
import torch

from neobench.models import memory
from neobench.models.flops import BENCH_RELEASED, RELEASED
from neobench.models.memory import GIB, Column, Precision, Step
from neobench.study import estimate

# Tiny networks of every layout the formula counts (transformers' classes, native NeoBERT).
H, F, HEADS, LAYERS = 64, 256, 4, 2
COMMON = {"vocab_size": 30522, "hidden_size": H, "num_hidden_layers": LAYERS,
          "num_attention_heads": HEADS, "intermediate_size": F}  # fmt: skip
TINY = {
    "bert": {"model_type": "bert", **COMMON, "hidden_dropout_prob": 0.0,
             "attention_probs_dropout_prob": 0.0},
    "modernbert": {"model_type": "modernbert", **COMMON, "pad_token_id": 0, "bos_token_id": 101,
                   "eos_token_id": 102, "cls_token_id": 101, "sep_token_id": 102,
                   "global_attn_every_n_layers": 1, "local_attention": 128,
                   "embedding_dropout": 0.0, "attention_dropout": 0.0, "mlp_dropout": 0.0},
    "neobert": {"model_type": "neobert", **COMMON},
    "deberta-v2": {"model_type": "deberta-v2", **COMMON, "relative_attention": True,
                   "position_buckets": 256, "pos_att_type": ["p2c", "c2p"],
                   "norm_rel_ebd": "layer_norm", "share_att_key": True,
                   "position_biased_input": False, "max_relative_positions": -1,
                   "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
}  # fmt: skip
# Padded to 42 tokens by MiniLM's tokenizer: 4 x 42 rows match no weight's shape.
TEXTS = ["a short one", "a somewhat longer sentence with more words in it " * 3,
         "medium length text here " * 2, "x " * 40]  # fmt: skip
# (layout, attention, bf16 autocast): CPU autocast keeps BERT's eager softmax in bf16 (CUDA's
# runs it in float32, as the formula counts), so that case is left to float32.
CASES = [
    (kind, attention, autocast)
    for kind in TINY
    for attention in (("eager",) if kind == "deberta-v2" else ("sdpa", "eager"))
    for autocast in (False, True)
    if not (kind == "bert" and attention == "eager" and autocast)
]


@pytest.fixture(scope="module")
def tokenizer(minilm):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm)


def st_model(kind: str, attention: str, folder, tokenizer):
    """A SentenceTransformer (the backbone + mean pooling) of the tiny ``kind``, as the recipe
    trains it."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoConfig, AutoModel

    from neobench.models import register

    register()
    torch.manual_seed(0)
    config = AutoConfig.for_model(**TINY[kind])
    AutoModel.from_config(config, attn_implementation=attention).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    backbone = Transformer(str(folder), model_kwargs={"attn_implementation": attention})
    return SentenceTransformer(modules=[backbone, Pooling(H, "mean")], device="cpu")


def saved_bytes(model, features: dict, autocast: bool) -> tuple[int, int]:
    """(bytes of the activations autograd keeps, bytes of autocast's weight copies) of one
    training forward: unique storages, parameters left out."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    shapes = {tuple(p.shape) for p in model.parameters() if p.dim() == 2}
    shapes |= {s[::-1] for s in shapes}
    kept: dict[int, int] = {}
    casts: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() in params:
            return tensor
        cast = tensor.dtype == torch.bfloat16 and tuple(tensor.shape) in shapes
        (casts if cast else kept)[storage.data_ptr()] = storage.nbytes()
        return tensor

    context = torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast)
    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), context:
        model(features)["sentence_embedding"]
    return sum(kept.values()), sum(casts.values())


@pytest.mark.parametrize(("kind", "attention", "autocast"), CASES)
def test_the_formula_counts_what_autograd_keeps(kind, attention, autocast, tokenizer, tmp_path):
    """Per layout, attention and precision, the formula's bytes for a padded column are those
    the saved-tensor hooks count (within 4%: the few they leave out, such as the attention's
    float32 statistics of one text), and autocast's weight copies are CAST_BYTES per weight
    (DeBERTa-v2 also casts its relative-position table in each layer: a few weight-sized
    copies per step, left out)."""
    model = st_model(kind, attention, tmp_path, tokenizer)
    features = model.preprocess(TEXTS)
    texts, longest = features["input_ids"].shape
    kept, casts = saved_bytes(model, features, autocast)
    fields = TINY[kind]
    column = Column.padded(int(texts), int(longest))
    formula = memory.column_bytes(fields, column, Precision(autocast, attention))
    assert kept == pytest.approx(formula, rel=0.04)
    if autocast and kind != "deberta-v2":
        matmuls = memory.parameters(fields)[1]
        assert casts == pytest.approx(memory.CAST_BYTES * matmuls, rel=0.04)


@pytest.mark.parametrize("name", list(RELEASED))
def test_every_parameter_is_counted(name):
    """Weights, gradients and moments are kept for every parameter: the count from a config's
    fields is the built network's (on torch's meta device), less BERT's unused pooler."""
    from transformers import AutoConfig, AutoModel

    from neobench.models import register

    register()
    fields = RELEASED[name]
    rest = {k: v for k, v in fields.items() if k != "model_type"}
    config = AutoConfig.for_model(fields["model_type"], **rest)
    with torch.device("meta"):
        network = AutoModel.from_config(config)
    built = sum(p.numel() for n, p in network.named_parameters() if not n.startswith("pooler."))
    assert memory.parameters(fields)[0] == built


def test_the_eager_only_types_are_the_classes_without_a_fused_kernel():
    from transformers import AutoConfig, AutoModel
    from transformers.models.auto.auto_factory import _get_model_class

    from neobench.models import attention, register

    register()
    for fields in RELEASED.values():
        kind = fields["model_type"]
        config = AutoConfig.for_model(kind)
        cls = _get_model_class(config, AutoModel._model_mapping)
        assert ("sdpa" not in attention.supported(cls)) == (kind in memory.EAGER_ONLY), kind


def test_the_shipped_h100_peaks_fit_the_formula(monkeypatch, tmp_path):
    """The formula is within 5% of the training peaks the shipped H100 record measured for BERT
    and ModernBERT; NeoBERT's (its unpadded path on CUDA) needs 1.47 x the activations."""
    monkeypatch.setenv("NEOBENCH_CACHE", str(tmp_path / "home"))
    fits = {f.model: f.factor for f in estimate.load_calibration(None).fits}
    assert fits["bert-base"] == pytest.approx(1.0, abs=0.05)
    assert fits["modernbert-base"] == pytest.approx(1.0, abs=0.05)
    assert fits["neobert"] == pytest.approx(1.47, abs=0.01)
    # The fit makes the formula's peak the measured one.
    record = json.loads((estimate.SHIPPED / "gpu-h100-train.json").read_text())
    row = next(r for r in record["sections"]["train"]["rows"] if r["model"] == "bert-base")
    fields = RELEASED[BENCH_RELEASED["bert-base"]]
    step = Step((Column.padded(64, 128),) * 2)
    peak = memory.fitted_peak(memory.estimate(fields, step, Precision(True)), fits["bert-base"])
    assert peak == pytest.approx(row["peak_memory_mb"] * 2**20, rel=1e-6)


def test_the_chunk_is_the_largest_that_fits_evened_out():
    fields = RELEASED["google-bert/bert-base-uncased"]
    step = Step((Column.padded(128, 512),) * 9)
    bf16 = Precision(True)
    plain = memory.estimate(fields, step, bf16)
    assert plain.peak / GIB == pytest.approx(221.9, abs=0.1)  # BERT-base at the recipe's worst
    for budget_gib in (6.0, 12.0, 24.0):
        budget = budget_gib * GIB
        chunk = memory.largest_chunk(fields, step, bf16, budget)
        assert memory.estimate(fields, step.chunked(chunk), bf16).peak <= budget
        # The largest that fits, then as many chunks of equal size.
        chunks = math.ceil(128 / chunk)
        bigger = math.ceil(128 / (chunks - 1)) if chunks > 1 else None
        assert bigger is None or memory.estimate(fields, step.chunked(bigger), bf16).peak > budget
    # Below the model states not one text fits.
    assert memory.largest_chunk(fields, step, bf16, plain.weights) is None


def test_the_plain_loss_pads_every_candidate_to_the_longest():
    """sentence-transformers' MNRL runs the queries apart and the candidates merged, padded to
    the longest of them; GradCache runs each column apart."""
    columns = (Column.padded(8, 10), Column.padded(8, 100), Column.padded(8, 20))
    assert memory.merged_candidates(columns) == (columns[0], Column.padded(16, 100))
    # A backbone that unpads gets the merged batch and runs its real tokens only.
    packed = (Column.of_lengths([4]), Column.of_lengths([5, 9]), Column.of_lengths([3]))
    assert memory.merged_candidates(packed) == (packed[0], Column.of_lengths([5, 9, 3]))
    # Batches sentence-transformers flattened (cu_seq_lens) run one forward per column.
    flat = tuple(Column.of_lengths(c, flattened=True) for c in ([4], [5, 9], [3]))
    assert memory.merged_candidates(flat) == flat
