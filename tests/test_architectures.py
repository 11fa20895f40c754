"""Any encoder: every backbone of the NeoBERT paper and the common embedding backbones, each built
tiny from a config with a tokenizer of its family, through load_model, neobench's encoder,
`finetune` (3 steps) and `eval` (BIOSSES) on the CPU, with the attention implementation that ran.

Only MiniLM's WordPiece tokenizer (bert-base-uncased's vocabulary) exists offline; the other
families get a small vocabulary trained here on real STS-B sentences from the mirror (BPE,
Unigram or WordPiece, as the family uses) inside the family's own tokenizer class, which adds its
normaliser, pre-tokenizer, special tokens and post-processor.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import SHARED
from sentence_transformers import SentenceTransformer

from neobench.cli.main import main
from neobench.compat import patches
from neobench.core.errors import NeobenchError
from neobench.encoder.encode import FastEncoder
from neobench.evaluation.runner import EvalConfig, run_eval
from neobench.models import register
from neobench.models.load import load_model
from neobench.train.finetune import FinetuneConfig, finetune

FIXTURES = Path(__file__).parent / "fixtures"
NOMIC_CODE = FIXTURES / "nomic_bert" / "modeling_nomic_bert.py"
VOCAB = 2000  # trained vocabularies: small, so a model builds in well under a second
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
# 3 steps of 8 pairs from the real STS-B sample, 64 tokens: the recipe's code path, in seconds.
TINY_RUN = ["manifest=sample-local", "datasets=STSB", "max_steps=3", "batch_size=8"]
TINY_RUN += ["max_seq_length=64", "checkpoint_every=100"]
REFERENCE = "varlen (per-sequence sdpa reference)"  # the packed kernel on the CPU


@dataclass(frozen=True)
class Arch:
    name: str
    model_type: str
    tokenizer: str  # a recipe of make_tokenizer
    cpu_attention: str  # what the run cards must name on the CPU under --attn-implementation auto
    unpadded: str  # "packed" (unpad.py), "native" (the model unpads itself) or "no"
    config: dict = field(default_factory=dict)
    remote: bool = False  # code in the model folder, loaded with --trust-remote-code


ARCHS = [
    Arch("bert", "bert", "minilm", "sdpa", "packed", {"max_position_embeddings": 512}),
    Arch(
        "roberta", "roberta", "bpe-roberta", "sdpa", "packed",
        {"max_position_embeddings": 514, "type_vocab_size": 1},
    ),
    Arch(
        "distilbert", "distilbert", "minilm-distilbert", "sdpa", "no",
        {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64},
    ),
    Arch("albert", "albert", "unigram-albert", "sdpa", "no", {"embedding_size": 16}),
    Arch("electra", "electra", "minilm", "sdpa", "packed", {"embedding_size": 16}),
    # DeBERTa-v2 and -v3 share model_type deberta-v2; v2 has the convolution layer and the
    # "p2c|c2p" string form, v3 neither; v3's tokenizer keeps punctuation inside pieces.
    Arch(
        "deberta-v2", "deberta-v2", "unigram-deberta-v2", "eager", "no",
        {
            "relative_attention": True, "position_biased_input": False, "position_buckets": 32,
            "pos_att_type": "p2c|c2p", "conv_kernel_size": 3, "conv_act": "gelu",
            "norm_rel_ebd": "layer_norm", "share_att_key": True,
        },
    ),
    Arch(
        "deberta-v3", "deberta-v2", "unigram-deberta-v3", "eager", "no",
        {
            "relative_attention": True, "position_biased_input": False, "position_buckets": 32,
            "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm", "share_att_key": True,
        },
    ),
    Arch(
        "mpnet", "mpnet", "wordpiece-mpnet", "eager", "no",
        {"max_position_embeddings": 514, "relative_attention_num_buckets": 32},
    ),
    Arch(
        "xlm-roberta", "xlm-roberta", "unigram-xlmr", "sdpa", "packed",
        {"max_position_embeddings": 514, "type_vocab_size": 1},
    ),
    Arch(
        "modernbert", "modernbert", "bpe-modernbert", "sdpa", "packed",
        {"max_position_embeddings": 512, "global_attn_every_n_layers": 2, "local_attention": 16},
    ),
    # transformers' own NomicBERT (what the hub checkpoints load as without the flag) ...
    Arch("nomic-bert", "nomic_bert", "minilm", "sdpa", "packed", {"max_position_embeddings": 512}),
    # ... and the repository's code: declares no SDPA, so auto falls back to eager.
    Arch("nomic-bert-remote", "nomic_bert", "minilm", "eager", "no", remote=True),
    Arch("neobert", "neobert", "neobert", "sdpa (padded, key mask)", "native"),
]  # fmt: skip


# ----------------------------------------------------------------- tokenizers of each family


@pytest.fixture(scope="session")
def sentences(mirror) -> list[str]:
    sts = pd.read_parquet(mirror / "mteb/stsbenchmark-sts/data/train-00000-of-00001.parquet")
    return [*sts["sentence1"], *sts["sentence2"]][:4000]  # enough for a 2,000-piece vocabulary


def _train(sentences: list[str], kind: str, specials: list[str]) -> dict:
    """A BPE (byte-level), Unigram (metaspace) or WordPiece (BERT) vocabulary of VOCAB pieces."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=VOCAB,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    elif kind == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.normalizer = normalizers.Lowercase()
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(
            vocab_size=VOCAB, special_tokens=specials, unk_token=specials[0], show_progress=False
        )
    else:
        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(
            vocab_size=VOCAB, special_tokens=specials, show_progress=False
        )
    tokenizer.train_from_iterator(sentences, trainer)
    return {"tokenizer": tokenizer, "model": json.loads(tokenizer.to_str())["model"]}


@pytest.fixture(scope="session")
def trained(sentences) -> dict:
    """One vocabulary per algorithm, trained once per session."""
    cache: dict[str, dict] = {}

    def get(kind: str, specials: list[str]) -> dict:
        key = f"{kind}:{','.join(specials)}"
        if key not in cache:
            cache[key] = _train(sentences, kind, specials)
        return cache[key]

    return get


def _pieces(trained, specials: list[tuple[str, float]], tail: list[str] = ()) -> list:
    """A Unigram vocabulary laid out as the family's: its special tokens first, [mask] last."""
    learned = [(p, s) for p, s in trained("unigram", ["<unk>"])["model"]["vocab"] if p != "<unk>"]
    return [*specials, *learned, *((t, 0.0) for t in tail)]


def make_tokenizer(kind: str, trained, minilm: Path) -> object:
    import transformers as tf

    if kind == "minilm":
        return tf.AutoTokenizer.from_pretrained(minilm)
    if kind == "minilm-distilbert":  # bert-base-uncased's vocabulary, no token_type_ids
        return tf.DistilBertTokenizer.from_pretrained(minilm)
    if kind == "neobert":
        return tf.AutoTokenizer.from_pretrained(SHARED / "fixtures" / "neobert-tiny")
    if kind == "bpe-roberta":
        model = trained("bpe", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])["model"]
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split()) for m in model["merges"]]
        return tf.RobertaTokenizer(vocab=model["vocab"], merges=merges)
    if kind == "bpe-modernbert":  # OLMo-style byte-level BPE with BERT's [CLS]/[SEP] template
        from tokenizers import decoders, processors

        base = trained("bpe", ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])["tokenizer"]
        backend = type(base).from_str(base.to_str())
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
        )
        backend.decoder = decoders.ByteLevel()
        return tf.PreTrainedTokenizerFast(
            tokenizer_object=backend,
            unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
            mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"],
        )  # fmt: skip
    if kind == "unigram-xlmr":
        specials = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
        return tf.XLMRobertaTokenizer(vocab=_pieces(trained, specials, ["<mask>"]))
    if kind == "unigram-albert":
        specials = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0)]
        return tf.AlbertTokenizer(vocab=_pieces(trained, specials))
    if kind.startswith("unigram-deberta"):
        specials = [("[PAD]", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[UNK]", 0.0)]
        return tf.DebertaV2Tokenizer(
            vocab=_pieces(trained, specials, ["[MASK]"]), split_by_punct=kind.endswith("v2")
        )
    if kind == "wordpiece-mpnet":
        model = trained("wordpiece", ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"])
        return tf.MPNetTokenizer(vocab=model["model"]["vocab"])
    raise AssertionError(f"no tokenizer recipe {kind!r}")


# ----------------------------------------------------------------- tiny models


def _special_ids(tokenizer: object) -> dict[str, int]:
    """The config's special ids from its tokenizer (embedding padding_idx must be in range)."""
    ids = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id or tokenizer.cls_token_id,
        "eos_token_id": tokenizer.eos_token_id or tokenizer.sep_token_id,
        "cls_token_id": tokenizer.cls_token_id,
        "sep_token_id": tokenizer.sep_token_id,
    }
    return {k: v for k, v in ids.items() if v is not None}


def build(arch: Arch, folder: Path, tokenizer: object) -> Path:
    """Random weights from a tiny config of ``arch``, saved with ``tokenizer`` as an HF folder."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    if arch.remote:
        spec = importlib.util.spec_from_file_location("modeling_nomic_bert", NOMIC_CODE)
        code = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(code)
        config = code.NomicBertConfig(
            vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_inner=64, n_positions=512
        )
        config.auto_map = {
            "AutoConfig": "modeling_nomic_bert.NomicBertConfig",
            "AutoModel": "modeling_nomic_bert.NomicBertModel",
        }
        config.architectures = ["NomicBertModel"]
        model = code.NomicBertModel(config)
        shutil.copy(NOMIC_CODE, folder)
    elif arch.model_type == "neobert":
        from neobench.models.neobert import NeoBERT, NeoBERTConfig

        config = NeoBERTConfig(**{**TINY, "intermediate_size": 96}, vocab_size=len(tokenizer))
        model = NeoBERT(config)
    else:
        kwargs = {**TINY, **_special_ids(tokenizer), "vocab_size": len(tokenizer), **arch.config}
        config = AutoConfig.for_model(arch.model_type, **kwargs)
        model = AutoModel.from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny(tmp_path_factory, trained, minilm) -> dict[str, Path]:
    """Every architecture's folder, built on first use and shared by all tests of the session."""
    built: dict[str, Path] = {}
    by_name = {a.name: a for a in ARCHS}

    def get(name: str) -> Path:
        if name not in built:
            arch = by_name[name]
            tokenizer = make_tokenizer(arch.tokenizer, trained, minilm)
            built[name] = build(arch, tmp_path_factory.mktemp(f"tiny-{name}"), tokenizer)
        return built[name]

    return get


TEXTS = [
    "A man is playing a guitar.",
    "The cells were incubated with 10 µM of the inhibitor for 24 h; viability dropped by half.",
    "short",
    "Über-naïve café résumé — non-ASCII text still tokenizes.",
    "A long sentence " * 20,
]


# ----------------------------------------------------------------- the matrix


@pytest.mark.parametrize("arch", ARCHS, ids=[a.name for a in ARCHS])
def test_encoder_equals_stock_encode_packed_or_not(arch, tiny, sentences):
    """neobench's encoder == stock SentenceTransformer.encode; --unpadded on packs exactly the
    listed architectures and runs the others padded, with the same numbers either way."""
    folder = tiny(arch.name)
    texts = [*TEXTS, *sentences[:40]]
    register()  # stock loading of native NeoBERT needs its classes, whatever ran before
    stock = SentenceTransformer(str(folder), device="cpu", trust_remote_code=arch.remote)
    stock.max_seq_length = 128
    reference = stock.encode(texts, batch_size=16)
    loaded = load_model(
        str(folder), max_seq_length=128, trust_remote_code=arch.remote, unpadded="on"
    )
    # packed where the backbone can and the unpadded patch is in force (NEOBENCH_PATCHES)
    assert loaded.packed == (arch.unpadded == "packed" and patches.on("unpadded-attention"))
    packs = arch.unpadded == "native" or loaded.packed  # NeoBERT unpads itself, no patch
    ran = REFERENCE if packs else arch.cpu_attention
    assert loaded.attn_implementation == ran
    fast = FastEncoder(loaded.model, "fp", None, token_budget=1024, packed=loaded.packed)
    ours = fast.embed(texts, None)
    assert ours.shape == reference.shape == (len(texts), 32)
    assert np.abs(ours - reference).max() < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS, ids=[a.name for a in ARCHS])
def test_finetune_then_eval_records_the_attention_that_ran(arch, tiny, tmp_path, mirror):
    out = tmp_path / "tuned"
    summary = finetune(
        FinetuneConfig(
            model=str(tiny(arch.name)),
            output=str(out),
            data_dir=str(SHARED / "data" / "finetune"),
            device="cpu",
            trust_remote_code=arch.remote,
            overrides=TINY_RUN,
        )
    )
    assert summary.steps == 3 and np.isfinite(summary.final_loss)
    card = _yaml(out / "neobench_run_card.yaml")
    # --padding packed, the default, where the backbone can and the unpadded patch is in force
    packs = arch.unpadded == "native" or (
        arch.unpadded == "packed" and patches.on("unpadded-attention")
    )
    assert card["model"]["attn_implementation"] == (REFERENCE if packs else arch.cpu_attention)
    assert card["padding"]["mode"] == ("packed" if packs else "padded")
    assert card["model"]["tokenizer"]["padding_side"] == "right"

    result = run_eval(
        EvalConfig(
            model=str(out),
            tasks=["BIOSSES"],
            data_dir=str(mirror),
            results=str(tmp_path / "res"),
            device="cpu",
            max_seq_length="128",
            trust_remote_code=arch.remote,
        )
    )
    (outcome,) = result.outcomes
    assert outcome.status == "evaluated" and -1.0 <= outcome.main_score <= 1.0
    eval_card = _yaml(result.run_card)
    assert eval_card["model"]["attn_implementation"] == arch.cpu_attention
    assert eval_card["model"]["unpadded"] is False  # auto: never on the CPU in float32


def _yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


# ----------------------------------------------------------------- attention choice


@pytest.mark.slow
def test_mpnet_has_no_sdpa_and_eval_runs_eager(tiny, one_repo_mirror, tmp_path, capsys):
    """The original failure: MPNetModel refuses SDPA. `neobench eval` now runs it eager, also under
    --unpadded on (MPNet cannot pack: it runs padded, and the card says so)."""
    code = main([
        "eval", "--model", str(tiny("mpnet")), "--data-dir", str(one_repo_mirror),
        "--results", str(tmp_path / "res"), "--tasks", "BIOSSES", "--device", "cpu",
        "--unpadded", "on", "--max-seq-length", "128",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    card = _yaml(next((tmp_path / "res").rglob("run-*.yaml")))
    assert card["model"]["attn_implementation"] == "eager"
    assert card["model"]["attn_implementation_requested"] == "auto"
    assert card["model"]["unpadded"] is False
    assert card["tasks"]["BIOSSES"]["status"] == "evaluated"


def test_a_request_the_class_cannot_serve_is_refused_with_the_fix(
    tiny, one_repo_mirror, tmp_path, capsys
):
    args = [
        "eval", "--model", str(tiny("mpnet")), "--data-dir", str(one_repo_mirror),
        "--results", str(tmp_path / "res"), "--tasks", "BIOSSES", "--device", "cpu",
    ]  # fmt: skip
    code = main([*args, "--attn-implementation", "sdpa"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err
    assert "MPNetModel does not support --attn-implementation sdpa" in err
    assert "it supports eager" in err and "--attn-implementation auto" in err
    code = main([*args, "--attn-implementation", "sdpaa"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "--attn-implementation value 'sdpaa'" in err and "'sdpa'" in err
    code = main([*args, "--attn-implementation", "flash_attention_2"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "flash attention runs on CUDA only" in err
    assert not list((tmp_path / "res").rglob("*.json"))


def test_finetune_takes_the_flag_too(tiny, tmp_path, capsys):
    code = main([
        "finetune", "--model", str(tiny("deberta-v3")), "--output", str(tmp_path / "out"),
        "--data-dir", str(SHARED / "data" / "finetune"), "--device", "cpu",
        "--attn-implementation", "flex_attn", "manifest=sample-local",
    ])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Did you mean 'flex_attention'" in err
    with pytest.raises(NeobenchError, match=r"DebertaV2Model does not support .* flex_attention"):
        load_model(str(tiny("deberta-v3")), attn_implementation="flex_attention")


@pytest.mark.parametrize("name", ["bert", "neobert"])
def test_eager_can_be_asked_of_any_class_and_gives_the_same_numbers(name, tiny):
    folder = str(tiny(name))
    auto = load_model(folder, max_seq_length=128)
    eager = load_model(folder, max_seq_length=128, attn_implementation="eager")
    assert eager.forward_attn_implementation.startswith("eager")
    assert not auto.forward_attn_implementation.startswith("eager")
    a, b = (FastEncoder(m.model, "fp", None).embed(TEXTS, None) for m in (auto, eager))
    assert np.abs(a - b).max() < 1e-5


def test_remote_code_falls_back_to_eager_and_refuses_an_explicit_sdpa(tiny):
    folder = str(tiny("nomic-bert-remote"))
    loaded = load_model(folder, trust_remote_code=True)
    assert loaded.attn_implementation == "eager"
    assert type(loaded.model[0].auto_model).__module__.startswith("transformers_modules.")
    with pytest.raises(NeobenchError, match=r"remote code \(NomicBertModel\) does not support"):
        load_model(folder, trust_remote_code=True, attn_implementation="sdpa")
    # Without the flag transformers would take its own nomic_bert code, which does not fit these
    # weights: one clear message asking for the flag.
    with pytest.raises(NeobenchError, match="pass --trust-remote-code"):
        load_model(folder)


# ----------------------------------------------------------------- tokenizer quirks


def _copy_with_tokenizer_config(folder: Path, dest: Path, **changes: object) -> Path:
    shutil.copytree(folder, dest)
    config_file = dest / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    config_file.write_text(json.dumps(config))
    return dest


def test_left_padding_tokenizer_gives_the_right_padded_embeddings(tiny, tmp_path):
    """BERT numbers positions from the first column: left padding would shift every real token."""
    right = load_model(str(tiny("bert")), max_seq_length=128)
    folder = _copy_with_tokenizer_config(tiny("bert"), tmp_path / "left", padding_side="left")
    left = load_model(str(folder), max_seq_length=128, unpadded="on")
    assert left.tokenizer["adjusted"] == ["padding_side 'left' -> 'right'"]
    a = FastEncoder(right.model, "fp", None).embed(TEXTS, None)
    b = FastEncoder(left.model, "fp", None, packed=left.packed).embed(TEXTS, None)
    assert np.abs(a - b).max() < 1e-5


def _without_pad(tiny, dest: Path, config_pad_id: bool, *tokens: str) -> Path:
    """A copy of the ModernBERT folder (the generic BPE tokenizer class) whose tokenizer has no
    pad token (nor ``tokens``), optionally without the config's pad_token_id."""
    folder = _copy_with_tokenizer_config(
        tiny("modernbert"), dest, pad_token=None, **dict.fromkeys(tokens)
    )
    tokenizer_json = json.loads((folder / "tokenizer.json").read_text())
    tokenizer_json["padding"] = None
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json))
    if not config_pad_id:
        config = json.loads((folder / "config.json").read_text())
        config["pad_token_id"] = None
        (folder / "config.json").write_text(json.dumps(config))
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(folder).pad_token is None  # the quirk is real
    return folder


@pytest.mark.parametrize(
    ("config_pad_id", "expected"),
    [(True, "'[PAD]' (from the config's pad_token_id)"), (False, "'[SEP]' (from sep_token)")],
)
def test_missing_pad_token_is_set_and_recorded(tiny, tmp_path, config_pad_id, expected):
    """The token of the config's pad_token_id, else eos / sep / unk, and the card says which."""
    loaded = load_model(str(_without_pad(tiny, tmp_path / "nopad", config_pad_id)))
    assert loaded.tokenizer["adjusted"] == [f"pad_token set to {expected}"]
    reference = load_model(str(tiny("modernbert")))
    a, b = (FastEncoder(m.model, "fp", None).embed(TEXTS, None) for m in (reference, loaded))
    assert np.abs(a - b).max() < 1e-5


def test_no_token_to_pad_with_is_a_clear_error(tiny, tmp_path):
    tokens = ("eos_token", "sep_token", "unk_token", "cls_token", "bos_token")
    folder = _without_pad(tiny, tmp_path / "bare", False, *tokens)
    with pytest.raises(NeobenchError, match="no pad token, and no eos, sep or unk token"):
        load_model(str(folder))


# ----------------------------------------------------------------- damaged weights


def test_truncated_weights_are_one_clear_error(tiny, one_repo_mirror, tmp_path, capsys):
    folder = tmp_path / "cut"
    shutil.copytree(tiny("bert"), folder)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    code = main([
        "eval", "--model", str(folder), "--data-dir", str(one_repo_mirror),
        "--results", str(tmp_path / "res"), "--tasks", "BIOSSES", "--device", "cpu",
    ])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err and err.count("error:") == 1
    assert (
        f"weights file model.safetensors is truncated: {len(data) // 2} bytes of the {len(data)}"
        in err
    )
    assert str(folder) in "".join(err.split())  # the folder, however the console wrapped it
    assert "download the model again" in err
