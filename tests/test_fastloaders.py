"""evaluate.fastloaders: mteb's text loaders and in-memory datasets as stock builds them, without
hashing their tables; package versions asked once; every patch undone after the block.

Compared on the mirror's Banking77 texts against mteb's own loader, outside the block.
"""

import datasets.arrow_dataset
import mteb
import mteb._create_dataloaders as loaders
import mteb.cache.result_cache as result_cache
import mteb.results.task_result as task_result
import pytest
import torch
from datasets import Dataset

from neobench.evaluation import fastloaders
from neobench.evaluation.fastloaders import fast_loaders, kept_texts, text_loader
from neobench.evaluation.mtebtexts import loader_texts
from neobench.evaluation.patches import NestedPatch

STOCK_LOADER = loaders._create_dataloader_from_texts
STOCK_FROM_DICT = vars(Dataset)["from_dict"]
STOCK_FINGERPRINT = datasets.arrow_dataset.generate_fingerprint
STOCK_VERSIONS = result_cache._get_package_versions
STOCK_DISTRIBUTION = task_result._mteb_distribution
ACCELERATORS = (torch.cuda, torch.xpu, torch.mtia)
STOCK_SEEDS = [a.manual_seed_all for a in ACCELERATORS]


@pytest.fixture(scope="module")
def texts(mirror_texts):
    return mirror_texts["sentences"][:3000]


def _batches(loader) -> list:
    return [batch["text"] for batch in loader]


def test_text_loader_builds_mteb_s_loader_and_keeps_its_texts(texts):
    stock = STOCK_LOADER(texts, batch_size=7)
    with fast_loaders():
        ours = loaders._create_dataloader_from_texts(texts, batch_size=7)  # what mteb calls
    assert type(ours.dataset) is Dataset
    assert ours.dataset.features == stock.dataset.features
    assert ours.dataset.data.table.equals(stock.dataset.data.table)
    assert ours.batch_size == stock.batch_size == 7 and ours.num_workers == stock.num_workers
    assert _batches(ours) == _batches(stock)
    assert kept_texts(ours.dataset) == texts
    assert loader_texts(ours) == texts
    assert kept_texts(stock.dataset) is None  # not one of ours: read from its column
    assert loader_texts(stock) == texts


def test_in_memory_datasets_are_fingerprinted_at_random_only_inside_the_block(texts):
    outside = [Dataset.from_dict({"text": texts}) for _ in range(2)]
    assert outside[0]._fingerprint == outside[1]._fingerprint  # datasets' content hash
    with fast_loaders():
        inside = [Dataset.from_dict({"text": texts}) for _ in range(2)]
        # A dataset made another way (here from a table) keeps its content hash.
        from_table = Dataset(outside[0].data)._fingerprint
    assert inside[0]._fingerprint != inside[1]._fingerprint
    assert outside[0]._fingerprint not in {d._fingerprint for d in inside}
    assert from_table == Dataset(outside[0].data)._fingerprint
    assert inside[0].data.table.equals(outside[0].data.table)
    assert inside[0].features == outside[0].features


def test_texts_that_are_not_strings_take_mteb_s_loader():
    with fast_loaders():
        loader = text_loader(["a", None, "b"], batch_size=2)
    assert kept_texts(loader.dataset) is None
    assert loader.dataset.data.table.equals(STOCK_LOADER(["a", None, "b"]).dataset.data.table)


def test_kept_texts_are_dropped_when_the_dataset_changes(texts):
    with fast_loaders():
        loader = text_loader(texts[:10])
    loader.dataset.set_format("numpy")  # in place: datasets renews the fingerprint
    assert kept_texts(loader.dataset) is None


def test_package_versions_are_asked_once_per_process(monkeypatch):
    asked = []
    stock_version = result_cache.version

    def counted(name):
        asked.append(name)
        return stock_version(name)

    monkeypatch.setattr(result_cache, "version", counted)
    expected = STOCK_VERSIONS()
    asked.clear()
    with fast_loaders():
        first = result_cache._get_package_versions()
        second = result_cache._get_package_versions()
    assert first == second == expected
    assert first is not second  # each caller gets its own dict
    assert len(asked) <= len(expected)  # at most once per package (none if asked before)
    assert expected["mteb"] == mteb.__version__


def test_every_patch_is_undone_after_the_block_and_subclasses_still_bind():
    class Sub(Dataset):
        pass

    with fast_loaders(), fast_loaders():  # nested: undone by the last one out
        assert isinstance(Sub.from_dict({"text": ["a"]}), Sub)
        assert datasets.arrow_dataset.generate_fingerprint is not STOCK_FINGERPRINT
    assert vars(Dataset)["from_dict"] is STOCK_FROM_DICT
    assert isinstance(Sub.from_dict({"text": ["a"]}), Sub)
    assert datasets.arrow_dataset.generate_fingerprint is STOCK_FINGERPRINT
    assert loaders._create_dataloader_from_texts is STOCK_LOADER
    assert result_cache._get_package_versions is STOCK_VERSIONS
    assert task_result._mteb_distribution is STOCK_DISTRIBUTION
    assert [a.manual_seed_all for a in ACCELERATORS] == STOCK_SEEDS
    assert fastloaders._in_from_dict.get() is False


def test_mteb_distribution_is_looked_up_once():
    with fast_loaders():
        first = task_result._mteb_distribution()
        assert task_result._mteb_distribution() is first
    assert first.version == STOCK_DISTRIBUTION().version == mteb.__version__


@pytest.mark.skipif(torch.backends.cuda.is_built(), reason="a torch built with CUDA seeds it")
def test_without_cuda_in_torch_seeding_queues_nothing_and_still_seeds_the_cpu():
    """mteb's evaluator seeding: the CPU generator as stock seeds it, no CUDA seed queued (nor
    an XPU or MTIA one, in a torch without them)."""
    from mteb._set_seed import _set_seed

    tracker = torch.cuda._lazy_seed_tracker
    _set_seed(7)  # stock: queues a CUDA seed, a new entry holding its formatted stack
    stock, queued = torch.rand(4), tracker.manual_seed_all_cb
    assert queued is not None
    with fast_loaders():
        _set_seed(7)
        assert torch.equal(torch.rand(4), stock)
        assert tracker.manual_seed_all_cb is queued  # nothing new queued
        for accelerator in ACCELERATORS[1:]:
            if not accelerator._is_compiled():
                assert accelerator.manual_seed_all is fastloaders._no_gpu_seed


def test_a_patched_inherited_attribute_is_removed_again():
    class Base:
        def f(self):
            return "base"

    class Child(Base):
        pass

    patch = NestedPatch((Child, "f", lambda self: "patched"))
    with patch.active():
        assert Child().f() == "patched" and Base().f() == "base"
    assert "f" not in vars(Child) and Child().f() == "base"


def test_one_file_is_mapped_in_place_and_several_still_in_a_pool():
    import threading

    import datasets.arrow_reader
    import datasets.data_files

    stock = [datasets.data_files.thread_map, datasets.arrow_reader.thread_map]
    where = []

    def work(x):
        where.append(threading.get_ident())
        return x * 2

    with fast_loaders():
        for thread_map in (datasets.data_files.thread_map, datasets.arrow_reader.thread_map):
            assert thread_map(work, [3], max_workers=4, disable=True) == [6]
            assert where.pop() == threading.get_ident()  # one item: this thread
            assert thread_map(work, [1, 2, 3], max_workers=4, disable=True) == [2, 4, 6]
            assert threading.get_ident() not in where  # several: the pool's threads
            where.clear()
    assert [datasets.data_files.thread_map, datasets.arrow_reader.thread_map] == stock


def test_lists_of_ints_hash_as_datasets_hashes_them_only_faster():
    """Fingerprints of row numbers: the C pickler's bytes are datasets' own, so every hash (and a
    select's fingerprint) is the one datasets gives outside the block; anything but a list of
    plain ints (bools, floats, nested lists) keeps datasets' path."""
    import random

    from datasets.fingerprint import Hasher

    rng = random.Random(0)
    values = [
        [rng.randrange(-(2**70), 2**70) for _ in range(rng.randrange(3000))] for _ in range(20)
    ]
    values += [[], [True, 1], [1, 1.0], [1, [2]], list(range(5000)), "text", (1, 2)]
    rows = Dataset.from_dict({"label": list(range(3000))})
    picked = rng.sample(range(3000), 700)
    stock = [Hasher.hash(v) for v in values], rows.select(picked)._fingerprint
    assert fastloaders._int_list_protocol() is not None  # the fast path is taken with these
    with fast_loaders():
        assert vars(Hasher)["hash"].__func__ is not fastloaders._stock_hash
        fast = [Hasher.hash(v) for v in values], rows.select(picked)._fingerprint
    assert fast == stock
    assert vars(Hasher)["hash"].__func__ is fastloaders._stock_hash
