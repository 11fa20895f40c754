"""Opt-in (-m network): the hub paths, on a machine that reaches huggingface.co.

The default suite runs with HF_HUB_OFFLINE=1; these tests undo that for themselves
(conftest's `online` fixture).
"""

import pytest

pytestmark = pytest.mark.network


def test_prefetch_then_verify_offline(online, tmp_path):
    from neobench.protocol import mirror
    from neobench.protocol.tasks import load_benchmark, select_tasks

    tasks = select_tasks(load_benchmark("MTEB(eng, v1)"), ["BIOSSES"])
    lock = mirror.prefetch(mirror.repo_needs(tasks), tmp_path)
    assert lock["mteb/biosses-sts"]["pinned_revision"] == tasks[0].metadata.dataset["revision"]
    rows = mirror.verify(tasks, tmp_path)
    assert [r.status for r in rows] == ["ok"]


def test_hub_model_id_loads_at_a_recorded_commit(online):
    from neobench.models.load import load_model

    loaded = load_model("sentence-transformers/all-MiniLM-L6-v2", device="cpu")
    assert len(loaded.revision) == 40 and loaded.source == "hub"
