"""Any encoder (hub id, HF folder, SentenceTransformer folder) -> a SentenceTransformer.

A plain encoder becomes Transformer + mean pooling. Every model gets one max sequence length (by
default the standard recipe's, docs/recipe.md) unless the caller keeps a SentenceTransformer
folder's own with ``"model"``. What was resolved (name, revision, length, attention kernel) is
returned for the run card.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from safetensors import SafetensorError

from neobench.compat import patches
from neobench.core.errors import NeobenchError
from neobench.models import attention
from neobench.models.backbone import check_weights, settle_tokenizer
from neobench.models.fingerprint import fingerprint
from neobench.protocol.config import standard

logger = logging.getLogger(__name__)

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass
class LoadedModel:
    model: object  # sentence_transformers.SentenceTransformer (typed loosely: imported lazily)
    name: str
    revision: str
    source: str  # "hub" | "local"
    kind: str  # "sentence-transformers" | "transformers-encoder"
    path: str
    max_seq_length: int
    attn_implementation: str
    architecture: str
    trust_remote_code: bool
    packed: bool = False  # neobench's encoder packs batches (unpad.py); NeoBERT unpads itself
    # What the backbone's own forward runs (training, stock encode); attn_implementation is what
    # neobench's encoder runs (the packed kernel when packed).
    forward_attn_implementation: str = ""
    # Tokenizer class, padding side, pad token, and what neobench adjusted (settle_tokenizer).
    tokenizer: dict[str, object] = field(default_factory=dict)

    @property
    def unpadded(self) -> bool:
        """Batches run on real tokens only: neobench packs them, or the model unpads itself
        (native NeoBERT, whose kernel name then says varlen)."""
        return self.packed or self.attn_implementation.startswith("varlen")


def parse_max_seq_length(value: str | int) -> int | str:
    """'512' -> 512, 'model' -> 'model'; anything else is an error."""
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        n = int(value)
        if n < 8:
            raise NeobenchError(f"--max-seq-length {n}: must be at least 8 tokens.")
        return n
    if value == "model":
        return "model"
    raise NeobenchError(f"--max-seq-length {value!r}: expected a number of tokens or 'model'.")


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise NeobenchError("--device cuda: no CUDA device is visible. Use --device cpu or auto.")
    if device not in {"cpu", "cuda"} and not device.startswith("cuda:"):
        raise NeobenchError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N.")
    return device


def check_spec(spec: str) -> str:
    """'local' or 'hub' for a --model value, without touching the network."""
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise NeobenchError(f"--model {spec}: is a file; pass the model folder that holds it.")
        return "local"
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1 or not HUB_ID.match(spec):
        raise NeobenchError(
            f"--model {spec}: no such folder. Pass an existing model folder or a hub id "
            "such as chandar-lab/NeoBERT."
        )
    return "hub"


def locate(spec: str, revision: str | None = None) -> tuple[Path, str, str]:
    """(local folder, source, revision) for a folder path or a hub id."""
    if check_spec(spec) == "local":
        path = Path(spec).expanduser().resolve()
        return path, "local", revision or fingerprint(path)
    return _download(spec, revision)


def display_name(spec: str, source: str, folder: Path) -> str:
    """The name a model's results are stored under by default: its hub id, or local/<folder>."""
    return spec if source == "hub" else f"local/{folder.name}"


def _download(repo_id: str, revision: str | None) -> tuple[Path, str, str]:
    from huggingface_hub import errors, snapshot_download

    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            # Only what a PyTorch encoder needs; skip TF/Flax/ONNX/OpenVINO copies.
            ignore_patterns=["*.h5", "*.msgpack", "*.onnx", "onnx/*", "openvino/*", "*.ot", "tf_*"],
        )
    except errors.LocalEntryNotFoundError:
        raise NeobenchError(
            f"--model {repo_id}: the Hugging Face hub cannot be reached (offline or "
            "HF_HUB_OFFLINE set) and the model is not in the local cache. Download it on a "
            f"connected machine (`hf download {repo_id} --local-dir DIR`) and pass "
            "--model DIR, or point HF_HOME at a cache that has it."
        ) from None
    except (errors.RepositoryNotFoundError, errors.GatedRepoError):
        raise NeobenchError(
            f"--model {repo_id}: no such model on the hub (or it is gated and you are not "
            "logged in). If you meant a local folder, check the path."
        ) from None
    except errors.RevisionNotFoundError:
        raise NeobenchError(f"--model {repo_id}: revision {revision!r} does not exist.") from None
    folder = Path(folder)
    return folder, "hub", folder.name  # the cache snapshot folder is named by the commit sha


def transformer_folder(folder: Path) -> Path:
    """Where the backbone's config.json lives (the root, or a SentenceTransformer module)."""
    modules = folder / "modules.json"
    if modules.is_file():
        for module in json.loads(modules.read_text()):
            if module.get("type", "").endswith("Transformer"):
                return folder / module.get("path", "")
    return folder


def check_encoder(config_dir: Path, spec: str) -> dict:
    """Refuse what is not a bidirectional encoder (causal LMs, seq2seq) with a clear message."""
    config_file = config_dir / "config.json"
    if not config_file.is_file():
        raise NeobenchError(
            f"--model {spec}: {config_dir} has no config.json (nor modules.json): not a "
            "Hugging Face model folder."
        )
    config = json.loads(config_file.read_text())
    from transformers.models.auto import modeling_auto as auto

    model_type = config.get("model_type", "?")
    architectures = config.get("architectures") or []
    causal_only = (
        model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and model_type not in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )
    causal_arch = bool(architectures) and all(
        a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration"))
        for a in architectures
    )
    if config.get("is_encoder_decoder") or config.get("is_decoder") or causal_only or causal_arch:
        raise NeobenchError(
            f"--model {spec}: model_type {model_type!r} (architectures {architectures}) is a "
            "decoder or encoder-decoder model, not a bidirectional encoder. neobench fine-tunes "
            "and evaluates encoders such as BERT, RoBERTa, ModernBERT or NeoBERT."
        )
    return config


def dropout_overrides(config: dict) -> dict[str, float]:
    """Every dropout probability of a config set to 0 (the recipe trains without dropout)."""
    return {
        key: 0.0
        for key, value in config.items()
        if "dropout" in key and isinstance(value, float) and not isinstance(value, bool)
    }


def load_model(
    spec: str,
    *,
    revision: str | None = None,
    max_seq_length: int | str | None = None,
    trust_remote_code: bool = False,
    device: str = "cpu",
    name: str | None = None,
    attn_implementation: str = "auto",
    half: bool = False,
    disable_dropout: bool = False,
    unpadded: str = "auto",
) -> LoadedModel:
    """Load ``spec`` as a SentenceTransformer with mean pooling and a fixed max length.
    ``half``: the forward runs in fp16/bf16 (flash kernels need it)."""
    if max_seq_length is None:
        max_seq_length = standard().max_seq_length
    folder, source, resolved_revision = locate(spec, revision)
    backbone_dir = transformer_folder(folder)
    config = check_encoder(backbone_dir, spec)
    _check_length(config, max_seq_length, spec)
    check_weights([folder, backbone_dir], spec)
    is_st = (folder / "modules.json").is_file()
    overrides = dropout_overrides(config) if disable_dropout else {}
    try:
        cls = attention.backbone_class(backbone_dir, trust_remote_code)
        options = attention.candidates(attn_implementation, cls, device, half, spec)
        model = attention.build_first(
            options, attn_implementation, spec,
            lambda impl: _build(
                folder, is_st, max_seq_length, trust_remote_code, device, impl, overrides
            ),
        )  # fmt: skip
    except (ValueError, OSError, KeyError, ImportError, RuntimeError, SafetensorError) as error:
        raise _load_error(spec, config, error, trust_remote_code) from None
    tokenizer = settle_tokenizer(model, config, spec)
    from neobench.models.neobert import varlen_kernel_name

    auto_model = model[0].auto_model
    packed = _packs(auto_model, unpadded, device)
    forward_kernel = _kernel(auto_model, device)
    return LoadedModel(
        model=model,
        name=name or display_name(spec, source, folder),
        revision=resolved_revision,
        source=source,
        kind="sentence-transformers" if is_st else "transformers-encoder",
        path=str(folder),
        max_seq_length=int(model.max_seq_length),
        attn_implementation=varlen_kernel_name(device) if packed else forward_kernel,
        architecture=",".join(config.get("architectures") or [config.get("model_type", "?")]),
        trust_remote_code=trust_remote_code,
        packed=packed,
        forward_attn_implementation=forward_kernel,
        tokenizer=tokenizer,
    )


def _check_length(config: dict, max_seq_length: int | str, spec: str) -> None:
    positions = config.get("max_position_embeddings") or config.get("max_length")
    if isinstance(max_seq_length, int) and positions and max_seq_length > positions:
        raise NeobenchError(
            f"--max-seq-length {max_seq_length} exceeds the {positions} position embeddings "
            f"of {spec}; use --max-seq-length {positions} or less."
        )


def _packs(auto_model: object, unpadded: str, device: str) -> bool:
    """Whether neobench's encoder packs batches for this backbone (unpad.py). "auto": on CUDA
    only (the CPU reference is slower than padded SDPA); "on": where the architecture allows."""
    from neobench.models import unpad

    if hasattr(auto_model.config, "unpadded_attention"):  # native NeoBERT unpads itself
        auto_model.config.unpadded_attention = unpadded
        return False
    packs = unpad.supports(auto_model)
    if unpadded == "on" and not packs:
        logger.warning(
            "--unpadded on: %s.%s cannot run unpadded (neobench packs transformers' own %s "
            "only); it runs padded.",
            type(auto_model).__module__,
            type(auto_model).__name__,
            ", ".join(sorted(unpad.POSITIONS)),
        )
    wanted = packs and (unpadded == "on" or (unpadded == "auto" and device.startswith("cuda")))
    return wanted and patches.on("unpadded-attention")  # the gate off: padded, as shipped


def _load_error(
    spec: str, config: dict, error: Exception, trust_remote_code: bool
) -> NeobenchError:
    """One clear message for what transformers or sentence-transformers raised while loading."""
    text = str(error)
    if "trust_remote_code" in text:
        return NeobenchError(
            f"--model {spec}: its code lives in the model repository (model_type "
            f"{config.get('model_type')!r}). Review that code, then pass --trust-remote-code."
        )
    if isinstance(error, SafetensorError):
        return NeobenchError(
            f"--model {spec}: a weights file cannot be read ({text}). The download is incomplete "
            "or damaged: delete the folder (or its hub cache entry) and download it again."
        )
    first_line = text.strip().splitlines()[0] if text.strip() else repr(error)
    hint = "Check that the folder holds a complete model and tokenizer."
    if isinstance(error, ImportError):
        hint = "Install the package it names (pip install ...) or pick another option."
    elif "AutoModel" in (config.get("auto_map") or {}) and not trust_remote_code:
        # transformers has its own code for some model types whose repositories also ship code
        # (nomic_bert); without the flag it takes its own, which may not fit these weights.
        hint = (
            f"The folder's config also maps AutoModel to code in the repository "
            f"({config['auto_map']['AutoModel']}), which transformers did not use: review that "
            "code, then pass --trust-remote-code."
        )
    return NeobenchError(
        f"--model {spec}: transformers could not load it ({type(error).__name__}: "
        f"{first_line}). {hint}"
    )


def _kernel(auto_model: object, device: str) -> str:
    """The attention kernel that will run: a native model says; others report transformers'."""
    describe = getattr(auto_model, "attention_kernel", None)
    if callable(describe):
        return describe(device)
    from neobench.compat.transformers import attn_implementation

    return str(attn_implementation(auto_model.config, "eager"))


def _build(
    folder: Path,
    is_st: bool,
    max_seq_length: int | str,
    trust_remote_code: bool,
    device: str,
    attn_implementation: str,
    config_overrides: dict[str, object],
) -> object:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    from neobench.models import register

    register()  # native NeoBERT: transformers' Auto classes know model_type "neobert"
    model_kwargs = {"attn_implementation": attn_implementation}
    if is_st:
        model = SentenceTransformer(
            str(folder),
            device=device,
            trust_remote_code=trust_remote_code,
            local_files_only=True,
            model_kwargs=model_kwargs,
            config_kwargs=config_overrides or None,
        )
        if isinstance(max_seq_length, int):
            model.max_seq_length = max_seq_length
        return model
    remote = {"trust_remote_code": trust_remote_code}
    transformer = Transformer(
        str(folder),
        max_seq_length=max_seq_length if isinstance(max_seq_length, int) else None,
        model_kwargs={**model_kwargs, **remote},
        config_kwargs={**remote, **config_overrides},
        processor_kwargs=remote,
    )
    pooling = Pooling(transformer.get_embedding_dimension(), "mean")
    return SentenceTransformer(modules=[transformer, pooling], device=device)
