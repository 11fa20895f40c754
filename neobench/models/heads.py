"""Task heads on an encoder's token states (GLUE): the authors' head over the first token, its
loss, and the wrapper that puts the head on a backbone transformers gives no such class."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput


class ClassificationHead(nn.Module):
    """The authors' GLUE head: the first token's state, dropout, dense + tanh, dropout, the
    classifier (one output: regression). Also neobench's head for a backbone transformers gives
    no sequence-classification class (EncoderClassifier)."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.classifier = nn.Linear(hidden_size, num_labels)

    def output(self, hidden: torch.Tensor, labels: torch.Tensor | None) -> SequenceClassifierOutput:
        """Logits of the token states, and their loss where labels are given."""
        logits = self(hidden)
        loss = (
            None
            if labels is None
            else classification_loss(logits, labels, self.classifier.out_features)
        )
        return SequenceClassifierOutput(loss=loss, logits=logits)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        x = self.dropout(hidden[:, 0])
        x = self.dropout(torch.tanh(self.dense(x)))
        return self.classifier(x)


def classification_loss(
    logits: torch.Tensor, labels: torch.Tensor, num_labels: int
) -> torch.Tensor:
    """Mean squared error for one output (STS-B), cross-entropy over the classes otherwise."""
    if num_labels == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.view(-1, num_labels).float(), labels.view(-1))


class EncoderClassifier(nn.Module):
    """An AutoModel backbone with ClassificationHead: what a backbone transformers gives no
    sequence-classification class is tuned with."""

    def __init__(self, encoder: nn.Module, config: Any, dropout: float) -> None:
        super().__init__()
        self.encoder = encoder
        self.config = config
        self.head = ClassificationHead(config.hidden_size, config.num_labels, dropout)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return self.head.output(hidden.last_hidden_state, labels)
