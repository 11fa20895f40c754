"""The model mteb evaluates: one plain class between mteb's protocols and neobench's encoder.

mteb 2.x reads any object with ``mteb_model_meta`` through ``EncoderProtocol`` and
``SearchProtocol`` (retrieval hands the whole search to the model: encoder.search). Prompts are
resolved in mteb's own key order and scores use the model's own similarity, so numbers equal
mteb's. The eval path: docs/guide.md, "`neobench eval`" (Encoding, Retrieval).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from neobench.compat import patches
from neobench.compat.mteb import (
    PlainRanking,
    create_dataloader,
    document_texts,
    loader_texts,
    query_texts,
)
from neobench.core.stages import stage
from neobench.encoder.encode import FastEncoder
from neobench.encoder.search import RunningTopK

if TYPE_CHECKING:
    from mteb.models import ModelMeta

    from neobench.core.cards import OutputModel

logger = logging.getLogger(__name__)

CORPUS_CHUNK = 200_000  # documents encoded (and held in host memory) at a time during search
NOT_TEXT = {"image", "audio", "video"}

Ranking = dict[str, dict[str, float]]  # query id -> {document id: score}


class MtebEncoder:
    """A SentenceTransformer as mteb sees it: encode, similarity, index/search and its meta.

    ``prompts`` (mteb's keys, ``Task-query`` > ``Task`` > ``Type-query`` > ``Type`` > ``query``)
    replace the folder's. ``name``, ``revision``, ``experiment_kwargs``: where mteb files results.
    ``declared`` (a fine-tuning card's model record) gives ``training_datasets``/``adapted_from``,
    else mteb's registry entry for ``name``, or None."""

    def __init__(
        self,
        model: Any,
        prompts: dict[str, str],
        fast: FastEncoder,
        *,
        name: str | None = None,
        revision: str | None = None,
        experiment_kwargs: dict[str, Any] | None = None,
        declared: OutputModel | None = None,
    ) -> None:
        from mteb.models import ModelMeta

        from neobench.protocol.overlap import meta_training

        # The profile's prompts only: sentence-transformers must not add the folder's own.
        model.prompts = dict(prompts)
        model.default_prompt_name = None
        self.model = model
        self.prompts = dict(prompts)
        self.fast = fast
        self.task_corpus: Any = None  # set by index(), consumed by search()
        self._stock: Any = None  # mteb's own wrapper, built for non-text inputs only
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a deprecated default argument of this mteb version
            meta = ModelMeta.from_sentence_transformer_model(model)
        identity = {"name": name, "revision": revision}
        self.mteb_model_meta: ModelMeta = meta.model_copy(
            update={
                **{k: v for k, v in identity.items() if v is not None},
                "experiment_kwargs": experiment_kwargs,
                # What the model trained on, in mteb's words: mteb saves it in model_meta.json.
                **meta_training(name or meta.name, declared),
            }
        )

    # --- EncoderProtocol -------------------------------------------------------------------

    def encode(
        self, inputs: Any, *, task_metadata: Any, prompt_type: Any = None, **kwargs: Any
    ) -> Any:
        """Embeddings (texts x dim, float32) of a data loader's texts under the task's prompt."""
        if set(inputs.dataset.features) & NOT_TEXT:  # not text: mteb's own path
            return self._stock_wrapper().encode(
                inputs, task_metadata=task_metadata, prompt_type=prompt_type, **kwargs
            )
        with stage("collate"):  # its dataset's column at once, in the plain case ("mteb-texts")
            texts = loader_texts(inputs) if patches.on("mteb-texts") else None
            if texts is None:
                texts = [text for batch in inputs for text in batch["text"]]
        return self._embed(texts, task_metadata, prompt_type)

    def _embed(
        self, texts: list[str], task_metadata: Any, prompt_type: Any, out: Any = None
    ) -> Any:
        """Embeddings of ``texts`` under the task's prompt; into ``out`` when given."""
        return self.fast.embed(texts, prompt_for(self.prompts, task_metadata, prompt_type), out)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The model's own similarity matrix (FastEncoder's float32 needs no upcast)."""
        return self.model.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        """Row-by-row similarity, as mteb's encoders compute it: by the meta's function name
        when there is one, else the model's own."""
        from mteb.similarity_functions import select_pairwise_similarity

        function = self.mteb_model_meta.similarity_fn_name
        if function is None:
            return self.model.similarity_pairwise(embeddings1, embeddings2)
        return select_pairwise_similarity(embeddings1, embeddings2, function)

    def _stock_wrapper(self) -> Any:
        if self._stock is None:
            from mteb.models import SentenceTransformerEncoderWrapper

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # mteb nags about missing query/document prompts
                self._stock = SentenceTransformerEncoderWrapper(
                    self.model, model_prompts=self.prompts or None
                )
        return self._stock

    # --- SearchProtocol --------------------------------------------------------------------

    def index(self, corpus: Any, **kwargs: Any) -> None:
        """Keep the corpus; it is encoded in search(), chunk by chunk."""
        self.task_corpus = corpus

    def search(
        self,
        queries: Any,
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        top_k: int,
        encode_kwargs: dict[str, Any],
        top_ranked: Any = None,
        num_proc: int | None = None,
        timer: Any = None,
        **_: Any,  # mteb's SearchProtocol reserves further keyword arguments
    ) -> Ranking:
        """The top_k documents of each query: a blocked top-k over the whole corpus, or, for
        reranking tasks (``top_ranked``), mteb's own reranking of each query's candidates."""
        from mteb.timing import TimingStack
        from mteb.types import PromptType

        corpus, self.task_corpus = self.task_corpus, None
        if corpus is None:
            raise ValueError("index() must be called before search()")
        timer = timer or TimingStack()
        where = {"task_metadata": task_metadata, "hf_split": hf_split, "hf_subset": hf_subset}
        call = _Call(where, encode_kwargs, num_proc)
        with timer("Encoding queries", split=hf_split, subset=hf_subset):
            query_embeddings = self._encode_rows(queries, PromptType.query, call)
        query_ids = queries["id"][:]  # one conversion (a datasets 5 Column, or a list)
        if top_ranked is not None:
            return self._rerank(corpus, query_ids, query_embeddings, top_ranked, top_k, call, timer)
        with timer("Searching corpus", split=hf_split, subset=hf_subset):
            return self._full_search(corpus, query_ids, query_embeddings, top_k, call)

    def _encode_rows(self, rows: Any, prompt_type: Any, call: _Call, out: Any = None) -> Any:
        """Queries or documents as mteb's data loader words them, encoded under the task's prompt
        (into ``out`` when given): the plain text case read column-wise (compat/mteb.py),
        anything else through mteb's data loader (no public equivalent) and encode()."""
        from mteb.types import PromptType

        with stage("collate"):
            modalities = call.task_metadata.get_modalities(prompt_type)
            if not patches.on("mteb-texts"):  # mteb's data loader, as shipped
                texts = None
            elif prompt_type == PromptType.document:
                texts = document_texts(rows, modalities)
            else:
                texts = query_texts(rows, modalities)
        if texts is not None:
            return self._embed(texts, call.task_metadata, prompt_type, out)
        with stage("collate"):
            loader = create_dataloader(
                rows,
                task_metadata=call.task_metadata,
                prompt_type=prompt_type,
                num_proc=call.num_proc,
                batch_size=call.encode_kwargs.get("batch_size", 32),
            )
        return self.encode(loader, prompt_type=prompt_type, **call.where, **call.encode_kwargs)

    def _full_search(
        self, corpus: Any, query_ids: list[str], query_embeddings: Any, top_k: int, call: _Call
    ) -> Ranking:
        """Corpus encoded CORPUS_CHUNK documents at a time, each chunk merged into a running
        top-k on the model's device; only the (queries x top_k) lists come back."""
        import torch
        from mteb.types import PromptType

        ranking = RunningTopK(
            torch.as_tensor(query_embeddings), top_k, self.similarity, self.model.device
        )
        reused = None  # the first chunk's matrix, the largest: every later chunk fits in it
        for start in range(0, len(corpus), CORPUS_CHUNK):
            with stage("collate"):
                chunk = corpus.select(range(start, min(start + CORPUS_CHUNK, len(corpus))))
            embeddings = self._encode_rows(chunk, PromptType.document, call, reused)
            with stage("scoring"):
                # Scored at once; the ranking keeps scores and indices, never the vectors.
                ranking.add(torch.as_tensor(embeddings))
            if reused is None and _writable_float32(embeddings):
                # Reused by later chunks (614 MB per 200k x 768): no page faults, one chunk's peak.
                reused = embeddings
        with stage("scoring"):
            scores, indices = ranking.result()  # (queries, k) each
        with stage("result building"):
            # One conversion of the ids, their (queries, k) table picked by numpy, each query's
            # dict zipped in C: no Python step per entry (1.7 million for ArguAna and SciFact).
            doc_ids = np.asarray(corpus["id"][:], dtype=object)
            names = doc_ids[indices.numpy(force=True)].tolist()
            ranking = zip(query_ids, map(dict, map(zip, names, scores.tolist())), strict=True)
            # Python floats (tolist) and str ids: the units' copy checks no entry (PlainRanking)
            plain = {*map(type, doc_ids), *map(type, query_ids)} <= {str}
            return PlainRanking(ranking) if plain else dict(ranking)

    def _rerank(
        self,
        corpus: Any,
        query_ids: list[str],
        query_embeddings: Any,
        top_ranked: Any,
        top_k: int,
        call: _Call,
        timer: Any,
    ) -> Ranking:
        """Each query scored against its own candidates by mteb's reranking function."""
        from mteb.models.search_wrappers import rerank_top_ranked_documents

        heaps = rerank_top_ranked_documents(
            task_corpus=corpus,
            query_idx_to_id=dict(enumerate(query_ids)),
            query_embeddings=query_embeddings,
            top_ranked=top_ranked,
            top_k=top_k,
            encode_kwargs=call.encode_kwargs,
            encode_fn=self.encode,
            similarity_fn=self.similarity,
            num_proc=call.num_proc,
            timer=timer,
            **call.where,
        )
        return {qid: {doc: score for score, doc in heap} for qid, heap in heaps.items()}


def prompt_for(prompts: dict[str, str], task_metadata: Any, prompt_type: Any) -> str | None:
    """The prompt of a task and side (query, document, None), in mteb's key order."""
    from mteb.models.abs_encoder import get_prompt_name

    name = get_prompt_name(prompts, task_metadata, prompt_type)
    return prompts.get(name) if name else None


def _writable_float32(array: Any) -> bool:
    """Whether FastEncoder.embed can write a later request's vectors into ``array``."""
    return (
        isinstance(array, np.ndarray)
        and array.dtype == np.float32
        and array.ndim == 2
        and array.flags.c_contiguous
        and array.flags.writeable
    )


@dataclass(frozen=True)
class _Call:
    """What mteb passes to search() that every encode call of that search needs again."""

    where: dict[str, Any]  # task_metadata, hf_split, hf_subset
    encode_kwargs: dict[str, Any]
    num_proc: int | None

    @property
    def task_metadata(self) -> Any:
        return self.where["task_metadata"]
