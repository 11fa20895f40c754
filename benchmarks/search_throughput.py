"""Retrieval scoring: mteb's chunked search + heap merge vs neobench's blocked top-k.

Both searches get the same precomputed float32 embeddings (encoding is measured by
encode_throughput.py), so the figure is the scoring and merging alone: mteb's
`chunked_full_corpus_search` (its SearchEncoderWrapper's full-corpus path: similarity per 50,000
document chunk, `torch.topk(k + 1)`, a Python heap per query) against `encoder.search.top_k`.
The embeddings are random unit vectors of a real model's width; the retrieved lists are compared.

    python benchmarks/search_throughput.py --queries 2000 --docs 200000
    python benchmarks/search_throughput.py --device cuda --queries 10000 --docs 2000000
"""

from __future__ import annotations

import argparse
import sys
import time

import torch


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=1_000, help="mteb's retrieval top_k (default)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import mteb
    from datasets import Dataset
    from mteb.models.search_wrappers import chunked_full_corpus_search
    from mteb.types import PromptType
    from sentence_transformers.util import cos_sim

    from neobench.compat.mteb import create_dataloader
    from neobench.encoder.search import top_k

    g = torch.Generator().manual_seed(0)
    queries = torch.nn.functional.normalize(torch.randn(args.queries, args.dim, generator=g), dim=1)
    docs = torch.nn.functional.normalize(torch.randn(args.docs, args.dim, generator=g), dim=1)
    corpus = Dataset.from_dict(
        {"id": [f"d{i}" for i in range(args.docs)], "text": [""] * args.docs}
    )
    rows = {f"d{i}": i for i in range(args.docs)}
    metadata = mteb.get_task("SciFact").metadata  # any text retrieval task's metadata

    fetching = [0.0]  # time spent building mteb's dataloaders and looking rows up: not scoring

    def precomputed(loader: object, **_: object) -> torch.Tensor:
        # mteb hands over a dataloader of the chunk's rows; answer with their embeddings.
        t = time.perf_counter()
        ids = [i for batch in loader for i in batch["id"]]
        out = docs[[rows[i] for i in ids]]
        fetching[0] += time.perf_counter() - t
        return out

    print(
        f"{args.queries:,} queries x {args.docs:,} documents, dim {args.dim}, top {args.k}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
    )
    start = time.perf_counter()
    stock = chunked_full_corpus_search(
        task_corpus=corpus,
        corpus_chunk_size=50_000,
        query_idx_to_id={i: f"q{i}" for i in range(args.queries)},
        query_embeddings=queries.numpy(),
        task_metadata=metadata,
        hf_subset="default",
        hf_split="test",
        top_k=args.k,
        encode_kwargs={"batch_size": 32, "show_progress_bar": False},
        encode_fn=precomputed,
        similarity_fn=cos_sim,
        search_k_offset=1,
    )
    # Without the row look-up, and without building the chunk dataloaders (measured alone below).
    stock_s = time.perf_counter() - start - fetching[0]
    start = time.perf_counter()
    for chunk in range(0, args.docs, 50_000):
        sub = corpus.select(range(chunk, min(chunk + 50_000, args.docs)))
        list(sub["id"])
        create_dataloader(
            sub, task_metadata=metadata, prompt_type=PromptType.document, batch_size=32
        )
    stock_s -= time.perf_counter() - start

    device = torch.device(args.device)
    start = time.perf_counter()
    _, indices = top_k(queries, docs, args.k, cos_sim, device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    ours_s = time.perf_counter() - start

    same = sum(
        {rows[d] for _, d in stock[f"q{q}"]} == set(indices[q].tolist())
        for q in range(args.queries)
    )
    print(f"stock mteb chunked search + heap merge (CPU) {stock_s:8.2f} s (scoring + merge only)")
    print(f"neobench blocked top-k ({device.type:<4})               {ours_s:8.2f} s")
    print(
        f"ratio stock / neobench: {stock_s / ours_s:.1f}x; identical lists: {same}/{args.queries}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
