"""The evaluation encoder: equal to SentenceTransformer.encode, and the shared embedding cache."""

import numpy as np
import pytest

from neobench.cli.main import main
from neobench.encoder.encode import EmbeddingCache, FastEncoder
from neobench.encoder.tokens import token_budget_batches


@pytest.fixture(scope="module")
def model(minilm_model):
    return minilm_model


@pytest.fixture(scope="module")
def tiny(tiny_bert):
    """MiniLM's pipeline (its tokenizer, 256 tokens, mean pooling, normalised) around a 2-layer,
    32-dim BERT: for the tests of batching, chunking and the cache, where the network does not
    matter (test_embeddings_equal_stock_encode compares the real MiniLM)."""
    from sentence_transformers import SentenceTransformer, models

    network = models.Transformer(str(tiny_bert), max_seq_length=256)
    pooling = models.Pooling(network.get_word_embedding_dimension(), "mean")
    return SentenceTransformer(modules=[network, pooling, models.Normalize()], device="cpu")


@pytest.fixture(scope="module")
def texts(mirror_texts):
    # Long abstracts (many at the 512-token limit) and short sentences: batches of every shape.
    abstracts, sentences = mirror_texts["abstracts"], mirror_texts["sentences"]
    return list(dict.fromkeys(abstracts[:48] + sentences[:120]))  # unique


@pytest.mark.parametrize("prompt", [None, "Given a scientific claim, retrieve documents. "])
def test_embeddings_equal_stock_encode(model, texts, tmp_path, prompt):
    stock = model.encode(texts, prompt=prompt, batch_size=32)
    fast = FastEncoder(model, "fp", EmbeddingCache(tmp_path / "c.sqlite")).embed(texts, prompt)
    assert fast.shape == stock.shape
    assert np.abs(fast - stock).max() < 1e-5


def test_cache_encodes_each_text_once(tiny, texts, tmp_path):
    path = tmp_path / "c.sqlite"
    first = FastEncoder(tiny, "fp", EmbeddingCache(path))
    a = first.embed(texts[:100] + texts[:100], None)  # duplicates inside one call
    assert first.texts_encoded == 100
    b = first.embed(texts[50:150], None)  # two "tasks" sharing 50 texts
    assert first.texts_encoded == 150
    np.testing.assert_array_equal(a[50:100], b[:50])
    later = FastEncoder(tiny, "fp", EmbeddingCache(path))  # a later run, same cache on disk
    later.embed(texts[:150], None)
    assert later.texts_encoded == 0 and later.forward_calls == 0
    later.embed(texts[:10], "Query: ")  # another prompt is another embedding
    assert later.texts_encoded == 10
    other = FastEncoder(tiny, "another-model", EmbeddingCache(path))
    other.embed(texts[:10], None)
    assert other.texts_encoded == 10


def test_a_failed_write_leaves_the_cache_as_it_was(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    cache.put_many([(b"k1", np.ones(4))])

    def items():
        yield b"k2", np.ones(4)
        raise KeyboardInterrupt  # killed in the middle of a batch

    with pytest.raises(KeyboardInterrupt):
        cache.put_many(items())
    assert set(EmbeddingCache(tmp_path / "c.sqlite").get_many([b"k1", b"k2"])) == {b"k1"}


def test_token_budget_batches():
    lengths = [5, 300, 17, 120, 120, 8, 256, 64]
    batches = token_budget_batches(lengths, budget=512)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert max(lengths[i] for i in batch) * len(batch) <= 512 or len(batch) == 1
    firsts = [lengths[b[0]] for b in batches]
    assert firsts == sorted(firsts, reverse=True)  # longest first


def test_cache_info_and_clear(tiny, texts, tmp_path, capsys):
    FastEncoder(tiny, "fp", EmbeddingCache(tmp_path / "embeddings.sqlite")).embed(texts[:20], None)
    assert main(["cache", "info", "--cache-dir", str(tmp_path)]) == 0
    assert "20 embeddings" in " ".join(capsys.readouterr().err.split())
    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert ": 0 embeddings" in " ".join(capsys.readouterr().err.split())


def test_encode_throughput_prints_both_rates_and_the_ratio(tiny_bert, mirror, capsys):
    """benchmarks/encode_throughput.py, stock encode against neobench's encoder."""
    from conftest import benchmark_script

    argv = ["--model", str(tiny_bert), "--data-dir", str(mirror), "--max-texts", "60"]
    code = benchmark_script("encode_throughput").main([*argv, "--device", "cpu", "--repeats", "1"])
    text = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "stock SentenceTransformer.encode" in text and "neobench encoder" in text
    assert "tokens/s" in text and "ratio neobench / stock:" in text and "60 texts" in text


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_chunked_tokenization_gives_the_same_embeddings(tiny, texts, monkeypatch, padding_side):
    """Texts are tokenized once per chunk and batches cut from it (right padding), or
    re-tokenized per batch when the tokenizer pads on the left."""
    import neobench.encoder.encode as encode

    monkeypatch.setattr(encode, "TOKENIZE_CHUNK", 48)  # the right-padded call spans chunks
    monkeypatch.setattr(tiny.tokenizer, "padding_side", padding_side)
    some = texts if padding_side == "right" else texts[:40]
    # Left padding shifts BERT's positions, so stock output depends on the batch: compare
    # unpadded single-text batches there.
    one_by_one = padding_side == "left"
    fast = FastEncoder(tiny, "fp", None, token_budget=1 if one_by_one else 700)
    stock_batch = 1 if one_by_one else 32
    for prompt in (None, "query: "):
        stock = tiny.encode(some, prompt=prompt, batch_size=stock_batch)
        assert np.abs(fast.embed(some, prompt) - stock).max() < 1e-5
    assert fast.forward_calls > 8


def test_new_vectors_are_stored_by_the_writer_thread_one_chunk_at_a_time(
    tiny, texts, tmp_path, monkeypatch
):
    """Each chunk's vectors go to the cache from the writer's thread, one put per chunk, and
    are all there when embed returns; a request part found in the cache is filled in place."""
    import threading

    import neobench.encoder.encode as encode

    monkeypatch.setattr(encode, "TOKENIZE_CHUNK", 64)  # the smallest chunk
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    puts: list[tuple[int, str]] = []
    put = cache.put

    def spy(keys, vectors):
        puts.append((len(keys), threading.current_thread().name))
        put(keys, vectors)

    monkeypatch.setattr(cache, "put", spy)
    fast = FastEncoder(tiny, "fp", cache)
    first = fast.embed(texts[:100], None)
    assert [n for n, _ in puts] == [64, 36]
    assert {name for _, name in puts} == {"neobench-cache-writer"}
    keys = EmbeddingCache.keys("fp", "", texts[:100])
    stored, found = EmbeddingCache(tmp_path / "c.sqlite").lookup(keys)
    assert found.all()
    np.testing.assert_array_equal(stored, first)
    # 60 found, the rest new (written into the found matrix's rows), two texts repeated.
    mixed = texts[40:160] + texts[:2]
    second = fast.embed(mixed, None)
    assert fast.texts_encoded == len(texts[:160])  # each new text once
    stock = tiny.encode(mixed, batch_size=32)
    assert np.abs(second - stock).max() < 1e-5
    fast.close()


def test_a_failure_in_the_writer_thread_reaches_the_caller(tiny, texts, tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path / "c.sqlite")

    def broken(keys, vectors):
        raise ValueError("not a database error")

    monkeypatch.setattr(cache, "put", broken)
    fast = FastEncoder(tiny, "fp", cache)
    with pytest.raises(RuntimeError, match="storing embeddings in the cache failed"):
        fast.embed(texts[:20], None)
    fast.close()
