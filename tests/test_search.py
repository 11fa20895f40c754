"""Retrieval on the device: blocked top-k gives mteb's retrieved lists and scores."""

import json

import mteb
import pytest
import torch
from mteb.models.search_wrappers import SearchEncoderWrapper
from sentence_transformers import SentenceTransformer
from sentence_transformers.util import cos_sim

from neobench.encoder.encode import EmbeddingCache, FastEncoder
from neobench.encoder.search import RunningTopK, top_k
from neobench.evaluation.adapter import MtebEncoder
from neobench.protocol import mirror as mirror_mod


@pytest.mark.parametrize(
    ("n_queries", "n_docs", "k", "query_block", "doc_block"),
    [(37, 500, 10, 8, 64), (5, 30, 100, 2, 7), (64, 1000, 1, 64, 1000), (3, 1, 5, 1, 1)],
)
def test_blocked_top_k_equals_a_full_sort(n_queries, n_docs, k, query_block, doc_block):
    g = torch.Generator().manual_seed(0)
    queries, docs = torch.randn(n_queries, 16, generator=g), torch.randn(n_docs, 16, generator=g)
    values, indices = top_k(queries, docs, k, cos_sim, "cpu", query_block, doc_block)
    full = cos_sim(queries, docs)
    expected_values, expected_indices = full.sort(dim=1, descending=True)
    keep = min(k, n_docs)
    assert values.shape == indices.shape == (n_queries, keep)
    torch.testing.assert_close(values, expected_values[:, :keep], rtol=0, atol=1e-6)
    assert torch.equal(indices, expected_indices[:, :keep])


def test_documents_added_in_pieces_keep_their_corpus_positions():
    g = torch.Generator().manual_seed(1)
    queries, docs = torch.randn(9, 8, generator=g), torch.randn(300, 8, generator=g)
    ranking = RunningTopK(queries, 20, cos_sim, "cpu", query_block=4, doc_block=16)
    for start in range(0, 300, 70):  # the corpus encoded chunk by chunk
        ranking.add(docs[start : start + 70])
    (values, indices), (all_values, all_indices) = (
        ranking.result(),
        top_k(queries, docs, 20, cos_sim),
    )
    assert torch.equal(indices, all_indices)
    torch.testing.assert_close(values, all_values, rtol=0, atol=1e-6)  # matmul shapes differ


@pytest.fixture(scope="module")
def scifact(mirror):
    task = mteb.get_task("SciFact")
    mirror_mod.point_tasks_at_mirror([task], mirror.resolve(), "MTEB(eng, v1)")
    task.load_data()
    split = task.dataset["default"]["test"]
    # A slice keeps the test quick; 300 documents span three corpus chunks of 125.
    return task, split["corpus"].select(range(300)), split["queries"].select(range(60))


@pytest.fixture(scope="module")
def encoder(minilm, tmp_path_factory):
    model = SentenceTransformer(str(minilm), device="cpu")
    model.max_seq_length = 128
    cache = EmbeddingCache(tmp_path_factory.mktemp("search") / "c.sqlite")
    return MtebEncoder(model, {}, FastEncoder(model, "minilm-128", cache))


def _run(searcher, task, corpus, queries, top_ranked=None, k=100):
    where = {"task_metadata": task.metadata, "hf_split": "test", "hf_subset": "default"}
    kwargs = {"batch_size": 32, "show_progress_bar": False}
    searcher.index(corpus, encode_kwargs=kwargs, **where)
    return searcher.search(queries, top_k=k, encode_kwargs=kwargs, top_ranked=top_ranked, **where)


def test_full_corpus_search_equals_mteb(scifact, encoder):
    task, corpus, queries = scifact
    stock = _run(SearchEncoderWrapper(encoder, corpus_chunk_size=125), task, corpus, queries)
    fast = _run(encoder, task, corpus, queries)
    assert stock.keys() == fast.keys()
    for qid in stock:
        assert len(fast[qid]) == len(stock[qid]) == 100
        # Same documents with the same scores; only the order of exact ties may differ.
        boundary = min(stock[qid].values())
        assert {d for d, s in fast[qid].items() if s > boundary} == {
            d for d, s in stock[qid].items() if s > boundary
        }
        for doc in fast[qid].keys() & stock[qid].keys():
            assert fast[qid][doc] == pytest.approx(stock[qid][doc], abs=1e-6)


def test_a_ranking_with_str_ids_is_copied_for_the_units_without_a_type_check(scifact, encoder):
    """The search marks its lists PlainRanking only when every id is a str (its scores are
    always Python floats): json_copy then skips the per-entry check, and still gives what a
    JSON round trip gives. Integer document ids get a plain dict (the round trip makes them
    strings)."""
    from neobench.compat.mteb import PlainRanking, json_copy

    task, corpus, queries = scifact
    fast = _run(encoder, task, corpus, queries, k=10)
    assert type(fast) is PlainRanking
    copy = json_copy(fast)
    assert type(copy) is dict and all(type(docs) is dict for docs in copy.values())
    assert copy == json.loads(json.dumps(fast)) and copy == fast
    assert all(type(s) is float for docs in fast.values() for s in docs.values())
    numbered = corpus.select(range(40))
    numbered = numbered.remove_columns("id").add_column("id", list(range(40)))
    with_ints = _run(encoder, task, numbered, queries, k=10)
    assert type(with_ints) is dict
    assert {type(d) for docs in with_ints.values() for d in docs} == {int}
    assert json_copy(with_ints) == json.loads(json.dumps(with_ints))


@pytest.mark.patches  # the chunks' shared matrix is the mteb-texts path's
def test_a_corpus_in_chunks_reuses_the_first_chunks_memory(scifact, encoder, monkeypatch):
    """300 documents in chunks of 125, 125 and 50: the later chunks are encoded into the first
    one's matrix, and the lists equal stock mteb's (no cache: every vector encoded)."""
    import numpy as np

    from neobench.evaluation import adapter

    task, corpus, queries = scifact
    fresh = MtebEncoder(encoder.model, {}, FastEncoder(encoder.model, "minilm-128", None))
    outs = []
    embed = fresh.fast.embed

    def spied(texts, prompt, out=None):
        result = embed(texts, prompt, out)
        outs.append((out, result))
        return result

    monkeypatch.setattr(fresh.fast, "embed", spied)
    monkeypatch.setattr(adapter, "CORPUS_CHUNK", 125)
    fast = _run(fresh, task, corpus, queries)
    documents = [(out, result) for out, result in outs if len(result) != len(queries)]
    assert [len(result) for _, result in documents] == [125, 125, 50]
    first = documents[0][1]
    assert documents[0][0] is None
    assert all(out is first and np.shares_memory(result, first) for out, result in documents[1:])
    stock = _run(SearchEncoderWrapper(encoder, corpus_chunk_size=125), task, corpus, queries)
    assert stock.keys() == fast.keys()
    for qid in stock:
        boundary = min(stock[qid].values())
        assert {d for d, s in fast[qid].items() if s > boundary} == {
            d for d, s in stock[qid].items() if s > boundary
        }
        for doc in fast[qid].keys() & stock[qid].keys():
            assert fast[qid][doc] == pytest.approx(stock[qid][doc], abs=1e-6)


def test_embed_into_a_given_array_equals_a_new_one(encoder):
    """FastEncoder.embed's ``out``: the same vectors, written into the array's first rows,
    with duplicates, with cached vectors, and refused when it cannot hold them."""
    import numpy as np

    texts = ["a cat", "a dog", "a cat", "the sea", "a dog"]
    plain = FastEncoder(encoder.model, "minilm-128", None)
    expected = plain.embed(texts, None)
    buffer = np.full((8, expected.shape[1]), np.nan, np.float32)
    for fast in (plain, encoder.fast):  # no cache; a cache (filled by the first call)
        for request in (texts, texts[:2], ["the sea", "a cat"]):
            got = fast.embed(request, None, buffer)
            assert np.shares_memory(got, buffer) and got.shape == (len(request), buffer.shape[1])
            np.testing.assert_allclose(got, plain.embed(request, None), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="at least 5 rows"):
        plain.embed(texts, None, buffer[:3])
    with pytest.raises(ValueError, match="float32"):
        plain.embed(texts, None, buffer.astype(np.float64))


def test_reranking_follows_each_querys_own_candidates(scifact, encoder):
    task, corpus, queries = scifact
    ids = corpus["id"]
    top_ranked = {
        qid: [ids[(7 * i + j) % len(ids)] for j in range(30)] for i, qid in enumerate(queries["id"])
    }
    top_ranked.pop(queries["id"][0])  # a query without candidates gets no result, as in mteb
    stock = _run(SearchEncoderWrapper(encoder), task, corpus, queries, top_ranked, k=10)
    fast = _run(encoder, task, corpus, queries, top_ranked, k=10)
    assert fast == stock
    assert fast[queries["id"][0]] == {}
    assert all(set(fast[q]) <= set(top_ranked[q]) for q in top_ranked)


def test_mteb_hands_retrieval_to_neobench(scifact, encoder, monkeypatch):
    calls = []
    original = type(encoder).search
    monkeypatch.setattr(
        type(encoder), "search", lambda self, *a, **kw: calls.append(1) or original(self, *a, **kw)
    )
    task, corpus, queries = scifact
    assert isinstance(encoder, mteb.models.models_protocols.SearchProtocol)
    _run(encoder, task, corpus, queries)
    assert calls
