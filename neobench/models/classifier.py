"""Any encoder -> a sequence classifier (or regressor: one output) for GLUE.

The head is transformers' sequence-classification class of the backbone (BERT's, RoBERTa's,
ModernBERT's own, native NeoBERT's: the authors' head), so each backbone is tuned the way its
authors' GLUE scripts tune it; a backbone transformers gives no such class gets neobench's head
(neobert.ClassificationHead over the first token) on its AutoModel. A SentenceTransformer folder
contributes its transformer module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neobench.core.errors import NeobenchError
from neobench.models.load import check_encoder, display_name, locate, transformer_folder


@dataclass
class LoadedClassifier:
    model: Any  # a transformers PreTrainedModel, or neobench's EncoderClassifier
    tokenizer: Any
    name: str
    revision: str
    source: str  # "hub" | "local"
    path: str
    architecture: str
    head: str  # the class that holds the head, and whose it is
    max_seq_length: int

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "revision": self.revision,
            "source": self.source,
            "path": self.path,
            "architecture": self.architecture,
            "head": self.head,
            "max_seq_length": self.max_seq_length,
        }


def resolve(
    spec: str, revision: str | None = None, name: str | None = None
) -> tuple[str, str, str]:
    """(display name, revision, source) of a --model value, without loading weights."""
    folder, source, resolved = locate(spec, revision)
    return name or display_name(spec, source, folder), resolved, source


def load_classifier(
    spec: str,
    num_labels: int,
    *,
    max_seq_length: int,
    classifier_dropout: float,
    revision: str | None = None,
    name: str | None = None,
    trust_remote_code: bool = False,
) -> LoadedClassifier:
    """Load ``spec`` with a freshly initialised task head (seed transformers' RNG first: the
    head's initial weights come from it)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from neobench.models import register

    register()  # native NeoBERT's classes
    folder, source, resolved = locate(spec, revision)
    backbone_dir = transformer_folder(folder)
    raw = check_encoder(backbone_dir, spec)
    config = AutoConfig.from_pretrained(
        str(backbone_dir), num_labels=num_labels, trust_remote_code=trust_remote_code
    )
    if hasattr(config, "classifier_dropout"):
        config.classifier_dropout = classifier_dropout
    if num_labels == 1:
        config.problem_type = "regression"
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except (OSError, ValueError):
        tokenizer = AutoTokenizer.from_pretrained(
            str(backbone_dir), trust_remote_code=trust_remote_code
        )
    _settle_pad(tokenizer, config, spec)
    try:
        if _has_class(config, trust_remote_code):
            model = AutoModelForSequenceClassification.from_pretrained(
                str(backbone_dir), config=config, trust_remote_code=trust_remote_code
            )
            head = f"{type(model).__name__} (transformers)"
        else:
            from transformers import AutoModel

            from neobench.models.heads import EncoderClassifier

            encoder = AutoModel.from_pretrained(
                str(backbone_dir), trust_remote_code=trust_remote_code
            )
            model = EncoderClassifier(encoder, config, classifier_dropout)
            head = "first token -> dense + tanh -> linear (neobench's head, on AutoModel)"
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise NeobenchError(
            f"--model {spec}: cannot be loaded with a task head ({first})."
        ) from None
    length = _length(raw, tokenizer, max_seq_length)
    return LoadedClassifier(
        model=model,
        tokenizer=tokenizer,
        name=name or display_name(spec, source, folder),
        revision=resolved,
        source=source,
        path=str(folder),
        architecture=",".join(raw.get("architectures") or [raw.get("model_type", "?")]),
        head=head,
        max_seq_length=length,
    )


def _has_class(config: Any, trust_remote_code: bool) -> bool:
    """Whether transformers maps the config to a sequence-classification class."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING

    remote = getattr(config, "auto_map", None) or {}
    if trust_remote_code and "AutoModelForSequenceClassification" in remote:
        return True
    return type(config) in MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING


def _settle_pad(tokenizer: Any, config: Any, spec: str) -> None:
    """A tokenizer without a pad token pads with its end or separator token (batches of pairs
    need one); the model's config learns its id."""
    if tokenizer.pad_token is None:
        stand_in = tokenizer.eos_token or tokenizer.sep_token or tokenizer.unk_token
        if stand_in is None:
            raise NeobenchError(
                f"--model {spec}: its tokenizer has no pad, end or separator token."
            )
        tokenizer.pad_token = stand_in
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = tokenizer.pad_token_id


def _length(config: dict, tokenizer: Any, wanted: int) -> int:
    """The recipe's length, or the model's own where it is shorter (BERT: 512)."""
    positions = config.get("max_position_embeddings")
    if config.get("model_type") in {"roberta", "xlm-roberta", "camembert"} and positions:
        positions -= 2  # their positions start after the padding index
    own = [n for n in (positions, getattr(tokenizer, "model_max_length", None)) if n and n < 10**6]
    return min([wanted, *own])
