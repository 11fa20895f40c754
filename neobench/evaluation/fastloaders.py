"""mteb's per-call bookkeeping that costs more than the work it wraps, while mteb evaluates.

What mteb (2.26), and datasets and torch under it, do on every task or encode call costs the main
thread time in which a GPU would wait, for nothing the evaluation reads. While ``fast_loaders()``
runs (around each task's evaluation, its data loading included):

- **Hashing in-memory datasets.** mteb builds datasets with ``Dataset.from_dict``: each text data
  loader (``_create_dataloader_from_texts``, behind ``create_dataloader(dataset,
  input_column=...)``: classification, clustering, STS, pair classification, bitext mining) and
  each set of a legacy clustering task. datasets fingerprints every one by pickling and hashing its
  whole Arrow table (~0.1 s for the 5 tasks of `bench host`; seconds for a clustering set of 700k
  texts). A fingerprint names a dataset's cache files, and a dataset built in memory has none:
  while ``fast_loaders()`` runs, ``Dataset.from_dict`` gives its dataset a random fingerprint
  (what datasets itself gives a dataset it cannot hash). The table, features and rows are
  from_dict's own; only the fingerprint's value differs.
- **Reading a loader's texts back.** `text_loader` is mteb's text loader that keeps the list it was
  given, so `kept_texts` hands the encoder the texts without converting the column back from Arrow.
  A text that is not a ``str`` (None, a number) takes mteb's loader unchanged.
- **Package versions per result.** ``ResultCache._get_package_versions`` asks importlib.metadata
  for five packages' versions on every save, and ``TaskResult.from_task_results`` looks up mteb's
  distribution (~15 ms: each scans every installed distribution). They cannot change under a
  running interpreter's imports, so they are asked once per process.
- **A thread pool per file.** ``datasets.load_dataset`` reads each data file's metadata (its
  origin: mtime, etag or revision) and memory-maps each cached shard through tqdm's
  ``thread_map``: a new pool per call, whose thread start (milliseconds on a busy machine) costs
  more than the work when there is one file. A retrieval task loads 3 splits, each asking 2-3
  times. One item is mapped in the calling thread; several still go to the pool.
- **Fingerprints of row numbers.** ``Dataset.select(indices)`` fingerprints its arguments with
  datasets' ``Hasher``: a pickle by dill's pure-Python pickler, ~1 us an int (classification's
  undersampling and experiments, retrieval's query filter: ~20 ms a run of `bench host`). For a
  list of plain ints that pickle is byte for byte the C pickler's (checked once per process on
  a probe of every int opcode, else left alone), which takes 1% of the time: the same hash.
- **Queued accelerator seeds without an accelerator.** mteb seeds every evaluator; torch's seeding
  of CUDA, XPU and MTIA, before the device starts, queues the seed with a formatted stack of the
  call (milliseconds per evaluator: ``linecache`` checks every source file of the stack). A torch
  built without that accelerator can never start it and never reads the queue, so with such a
  build its seeding is skipped. On a GPU the model's move to the device has started CUDA, and
  seeding it is immediate anyway.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import sys
from collections.abc import Callable, Sized
from contextvars import ContextVar
from typing import Any

import datasets.arrow_dataset
import datasets.arrow_reader
import datasets.data_files
from datasets import Dataset
from datasets.fingerprint import Hasher, generate_random_fingerprint
from mteb._create_dataloaders import _create_dataloader_from_texts as _stock_text_loader

from neobench.evaluation.patches import NestedPatch

_TEXTS = "_neobench_texts"  # attribute of a dataset text_loader built: (fingerprint, texts)
# mteb's modules that hold ``_create_dataloader_from_texts`` under its own name (imported from
# mteb._create_dataloaders, which holds the one create_dataloader calls).
_LOADER_MODULES = (
    "mteb._create_dataloaders",
    "mteb._evaluators.pair_classification_evaluator",
    "mteb._evaluators.text.bitext_mining_evaluator",
    "mteb._evaluators.text.summarization_evaluator",
    "mteb._evaluators.zeroshot_classification_evaluator",
    "mteb._evaluators.image.imagetext_pairclassification_evaluator",
)

_stock_from_dict = vars(Dataset)["from_dict"].__func__
_stock_fingerprint = datasets.arrow_dataset.generate_fingerprint
_in_from_dict: ContextVar[bool] = ContextVar("neobench_in_from_dict", default=False)


def _from_dict(cls: type[Dataset], *args: Any, **kwargs: Any) -> Dataset:
    """``Dataset.from_dict``, its dataset fingerprinted at random (see the module doc)."""
    token = _in_from_dict.set(True)
    try:
        return _stock_from_dict(cls, *args, **kwargs)
    finally:
        _in_from_dict.reset(token)


def _fingerprint(dataset: Dataset) -> str:
    # Dataset.__init__ asks for one only when none was given; from_dict never gives one.
    return generate_random_fingerprint() if _in_from_dict.get() else _stock_fingerprint(dataset)


def text_loader(text: Any, batch_size: int = 32, num_proc: int | None = None, **kwargs: Any) -> Any:
    """mteb's ``_create_dataloader_from_texts``, its dataset keeping the list of texts."""
    texts = list(text)  # a list, or a datasets Column (one conversion under fastdata's patch)
    if not {*map(type, texts)} <= {str}:  # the types gathered in C, not a Python step a text
        return _stock_text_loader(text, batch_size, num_proc, **kwargs)
    loader = _stock_text_loader(texts, batch_size, num_proc, **kwargs)
    setattr(loader.dataset, _TEXTS, (loader.dataset._fingerprint, texts))
    return loader


def kept_texts(dataset: Any) -> list[str] | None:
    """The texts `text_loader` built ``dataset`` from, if it did and the dataset is unchanged
    (datasets renews the fingerprint of any change made in place)."""
    kept = getattr(dataset, _TEXTS, None)
    if kept is None or kept[0] != getattr(dataset, "_fingerprint", None):
        return None
    return kept[1]


def _one_in_place(stock: Callable[..., list]) -> Callable[..., list]:
    """tqdm's ``thread_map`` (as ``stock``), mapping a single item in the calling thread."""

    def mapped(fn: Callable[..., Any], *iterables: Any, **kwargs: Any) -> list:
        if iterables and all(isinstance(i, Sized) and len(i) == 1 for i in iterables):
            return [fn(*args) for args in zip(*iterables, strict=True)]
        return stock(fn, *iterables, **kwargs)

    return mapped


_stock_hash = vars(Hasher)["hash"].__func__
# Ints of every size pickle writes differently (1, 2, 4 bytes, long, negative), and more than a
# batch of APPENDS (1,000): if datasets' pickle of these is the C pickler's, so is every list's.
_INT_PROBE = [0, 1, 255, 256, 65535, 65536, 2**31 - 1, 2**31, -1, -(2**31), -(2**31) - 1]
_INT_PROBE += [2**64, -(2**100), *range(1500)]


def _int_list_protocol() -> int | None:
    """The pickle protocol with which the C pickler gives datasets' bytes for a list of ints,
    or None when it does not (another datasets or dill: the fast path is then not taken)."""
    from datasets.utils._dill import dumps

    stock = dumps(_INT_PROBE)
    protocol = stock[1] if stock[:1] == pickle.PROTO else None
    same = protocol is not None and pickle.dumps(_INT_PROBE, protocol=protocol) == stock
    return protocol if same else None


def _hash_int_lists(protocol: int) -> Callable[..., str]:
    def hashed(cls: type[Hasher], value: Any) -> str:
        if type(value) is list and {*map(type, value)} <= {int}:  # bools are not ints here
            return cls.hash_bytes(pickle.dumps(value, protocol=protocol))
        return _stock_hash(cls, value)

    return hashed


def _no_gpu_seed(seed: int) -> None:
    """manual_seed_all of an accelerator torch was built without: nothing to seed, ever."""


@functools.cache
def _patch() -> NestedPatch:
    """Built at first use: the modules must be imported (mteb imports them with its tasks)."""
    import mteb.cache.result_cache as result_cache
    import mteb.results.task_result as task_result
    import torch

    asked = functools.cache(result_cache._get_package_versions)
    changes: list[tuple[Any, str, Any]] = [
        (Dataset, "from_dict", classmethod(_from_dict)),
        (datasets.arrow_dataset, "generate_fingerprint", _fingerprint),
        (result_cache, "_get_package_versions", lambda: dict(asked())),  # a dict per caller
        (task_result, "_mteb_distribution", functools.cache(task_result._mteb_distribution)),
    ]
    protocol = _int_list_protocol()
    if protocol is not None:
        changes.append((Hasher, "hash", classmethod(_hash_int_lists(protocol))))
    for module in (datasets.data_files, datasets.arrow_reader):
        changes.append((module, "thread_map", _one_in_place(module.thread_map)))
    for accelerator in (torch.cuda, torch.xpu, torch.mtia):  # each one torch.manual_seed seeds
        if not getattr(accelerator, "_is_compiled", lambda: True)():
            changes.append((accelerator, "manual_seed_all", _no_gpu_seed))
    for name in _LOADER_MODULES:
        held = getattr(sys.modules.get(name), "_create_dataloader_from_texts", None)
        if held is _stock_text_loader:
            changes.append((sys.modules[name], "_create_dataloader_from_texts", text_loader))
    return NestedPatch(*changes)


def fast_loaders() -> contextlib.AbstractContextManager[None]:
    """Unhashed in-memory datasets, text loaders that keep their texts and package versions
    asked once, while the block runs (nestable)."""
    return _patch().active()
