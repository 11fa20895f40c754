import time

import pytest

from neobench.core.errors import NeobenchError
from neobench.models.load import fingerprint, load_model, parse_max_seq_length


def test_plain_encoder_becomes_transformer_plus_mean_pooling(tiny_bert):
    loaded = load_model(str(tiny_bert), device="cpu")
    assert loaded.kind == "transformers-encoder"
    assert loaded.max_seq_length == 512
    assert loaded.model[1].pooling_mode == "mean"
    assert loaded.attn_implementation == "sdpa"
    assert loaded.name == f"local/{tiny_bert.name}"
    assert loaded.revision.startswith("local-")
    assert loaded.model.encode(["a sentence"]).shape == (1, 32)


def test_one_max_length_for_every_backbone_unless_model_is_asked(minilm):
    assert load_model(str(minilm), device="cpu").max_seq_length == 512
    assert load_model(str(minilm), max_seq_length="model", device="cpu").max_seq_length == 256
    assert load_model(str(minilm), max_seq_length=128, device="cpu").max_seq_length == 128


def test_length_beyond_position_embeddings_is_refused(tiny_bert):
    with pytest.raises(NeobenchError, match="exceeds the 512 position embeddings"):
        load_model(str(tiny_bert), max_seq_length=1024, device="cpu")


@pytest.mark.parametrize("value", ["long", "0", "-3"])
def test_bad_max_seq_length(value):
    with pytest.raises(NeobenchError, match="--max-seq-length"):
        parse_max_seq_length(value)


def test_causal_lm_is_refused(tiny_gpt2):
    with pytest.raises(NeobenchError, match="not a bidirectional encoder"):
        load_model(str(tiny_gpt2), device="cpu")


def test_missing_folder_is_refused(tmp_path):
    with pytest.raises(NeobenchError, match="no such folder"):
        load_model(str(tmp_path / "nope"), device="cpu")


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(NeobenchError, match=r"no config\.json"):
        load_model(str(tmp_path), device="cpu")


def test_hub_id_offline_fails_fast_with_a_fix():
    start = time.perf_counter()
    with pytest.raises(NeobenchError, match="cannot be reached") as error:
        load_model("some-org/some-encoder-that-is-not-cached", device="cpu")
    assert time.perf_counter() - start < 10
    assert "--local-dir" in str(error.value)


def test_fingerprint_tracks_weights_not_run_files(tiny_bert, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert, copy)
    assert fingerprint(copy) == fingerprint(tiny_bert)
    (copy / "README.md").write_text("notes")
    (copy / "neobench_run_card.yaml").write_text("x: 1")
    assert fingerprint(copy) == fingerprint(tiny_bert)
    (copy / "config.json").write_text((copy / "config.json").read_text() + " ")
    assert fingerprint(copy) != fingerprint(tiny_bert)


def test_fingerprint_is_remembered_until_a_file_changes(tiny_bert, tmp_path, monkeypatch):
    """The hash is kept in neobench's folder, never in the model folder; a file rewritten with
    its old size and mtime put back is hashed again (its ctime moved), and a damaged memo is
    only a slower load."""
    import json
    import os
    import shutil

    from neobench.core.home import CACHE_ENV
    from neobench.models.fingerprint import _memo_path

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "home"))
    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert, copy)
    files = sorted(p.name for p in copy.rglob("*"))
    first = fingerprint(copy)
    assert sorted(p.name for p in copy.rglob("*")) == files  # the model folder is not written
    memo_file = _memo_path(copy)
    assert memo_file.parent == tmp_path / "home" / "fingerprints"
    memo = json.loads(memo_file.read_text())
    assert memo["fingerprint"] == first and any(f[0] == "config.json" for f in memo["files"])
    assert fingerprint(copy) == first
    config = copy / "config.json"
    before = config.stat()
    text = config.read_text()
    config.write_text(text.replace('"', "'", 1))  # same size
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime
    assert (config.stat().st_size, config.stat().st_mtime_ns) == (
        before.st_size,
        before.st_mtime_ns,
    )
    changed = fingerprint(copy)
    assert changed != first
    config.write_text(text)
    assert fingerprint(copy) == first  # the content decides, not the memo
    memo_file.write_text("{not json")
    assert fingerprint(copy) == first


def test_unloadable_folder_is_a_clear_error_not_a_traceback(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert", "architectures": ["BertModel"]}')
    with pytest.raises(NeobenchError, match="could not load it"):
        load_model(str(tmp_path), device="cpu")
