"""Any encoder gets a GLUE task head: transformers' sequence-classification class where the
backbone has one, native NeoBERT's (the authors' head), neobench's on AutoModel otherwise."""

from __future__ import annotations

import torch

from neobench.models.classifier import load_classifier


def test_packaged_minilm_gets_transformers_head_and_a_regression_loss(minilm) -> None:
    loaded = load_classifier(str(minilm), 1, max_seq_length=1024, classifier_dropout=0.1)
    assert loaded.head.startswith("BertForSequenceClassification")
    assert loaded.max_seq_length == 512  # the recipe's 1024 cut to BERT's positions
    batch = loaded.tokenizer(["a cat sits"], ["a dog sits"], return_tensors="pt")
    out = loaded.model(**batch, labels=torch.tensor([3.0]))
    assert out.logits.shape == (1, 1) and torch.isfinite(out.loss)


def test_native_neobert_has_the_authors_head(tmp_path) -> None:
    from transformers import AutoModelForSequenceClassification

    from neobench.models import register
    from neobench.models.neobert import NeoBERTConfig

    register()
    config = NeoBERTConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, num_labels=3,
    )  # fmt: skip
    model = AutoModelForSequenceClassification.from_config(config)
    assert type(model).__name__ == "NeoBERTForSequenceClassification"
    ids = torch.randint(1, 100, (2, 7))
    out = model(ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([0, 2]))
    assert out.logits.shape == (2, 3)
    out.loss.backward()
    assert model.model.encoder.weight.grad is not None  # the encoder trains with the head
