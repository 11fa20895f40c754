"""The cluster rehearsal (benchmarks/cluster_rehearsal.py), reduced to a test: one backbone, one
seed, two eval shards, one `scontrol requeue` of the fine-tune mid-training and one scancel of a
random running job, on the session's local Slurm cluster. `study run` repeated until done gives
the table; the faults are survived; every loss and score equals a fault-free run of the same plan.
The full size (136 jobs, every kind of fault) is the script itself: too long for the suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# Two STS tasks of the mirror, one per shard: BIOSSES (the smallest) and SICK-R, whose 19,854
# sentences keep its shard encoding ~4 s on an idle machine, so the scancel (1 s after the
# shard's first line, on the shard with the most work) lands while it runs; STS16's shard ended
# ~1 s after its first line, before the scancel or in the instant of it. 120 steps under a limit
# the fine-tune never reaches (the limit's own requeue is the full rehearsal's). The fine-tune
# may be requeued between its 5th step in a window and its 115th: at 0.03-0.15 s a step, a span
# of 3-15 s, which the watcher (polling five times a second while a fault is owed) does not
# miss under load.
STEPS = 120
REDUCED = [
    "--backbones", "BERT", "--seeds", "1", "--shards", "2",
    "--tasks", "BIOSSES,SICK-R",
    "--steps", str(STEPS), "--finetune-time", "0:05:00",
    "--scancel", "1", "--requeue", "1", "--slurmd-kills", "0", "--time-limits", "0",
    "--fault-gap", "2", "--scancel-after", "1", "--timeout-min", "14",
]  # fmt: skip


def test_a_reduced_rehearsal_survives_its_faults_with_the_reference_numbers(
    slurm_cluster, mirror, tmp_path
):
    out = tmp_path / "report.json"
    argv = [sys.executable, str(REPO / "benchmarks" / "cluster_rehearsal.py"), *REDUCED]
    argv += ["--data-dir", str(mirror), "--work", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(argv, env=slurm_cluster.env, capture_output=True, text=True, timeout=960)
    said = done.stdout[-4000:] + done.stderr[-4000:]
    assert out.is_file(), said
    report = json.loads(out.read_text())
    assert done.returncode == 0 and report["ok"], (report["problems"], said)

    for run in (report["faulted"], report["reference"]):
        assert run["jobs"] == run["done"] == 4 and not run["not_done"]  # 1 + 2 shards + table
        assert run["table"] and Path(run["table"]).is_file()
    assert 2 <= len(report["faulted"]["rounds"]) <= 4  # the submission, then --wait rounds

    faults = {f["kind"]: f for f in report["faults"]}
    assert sorted(faults) == ["requeue", "scancel"] and len(report["faults"]) == 2
    assert all(f["rc"] == 0 and f["survived"] for f in report["faults"]), report["faults"]
    requeued = faults["requeue"]["key"]
    assert requeued.startswith("finetune/")
    # It ran again after the requeue (the rehearsal requeues only a fine-tune with steps left).
    windows = report["finetune_windows"][requeued]
    assert windows["starts"] >= 2, (faults["requeue"], windows)
    # The scancelled job ended CANCELLED; a later round ran it again unless its output was whole
    # already (a fine-tune cancelled while it saved its model, say): done either way.
    cancelled = [w for w in report["faulted"]["failed_windows"] if w["fault"] == "scancel"]
    assert [w["key"] for w in cancelled] == [faults["scancel"]["key"]]
    assert cancelled[0]["state"] == "CANCELLED"
    assert not report["reference"]["failed_windows"]  # the reference ran without a fault

    compare = report["compare"]
    assert compare["finetunes_equal"] and len(compare["finetunes"]) == 1
    for tune in compare["finetunes"].values():
        assert tune["final_loss_equal"] and tune["curve_max_abs_diff"] <= 1e-6
        assert tune["faulted"]["steps"] == tune["reference"]["steps"] == STEPS
    scores = compare["scores"]
    assert compare["scores_equal"] and scores["task_results_expected"] == 2
    assert not scores["missing"] and scores["beyond_tolerance"] == 0
    assert scores["numbers_compared"] > 8  # every number of each task's scores, not one

    overhead = report["faulted"]["overhead"]
    assert overhead["submission_s_per_job"] > 0 and overhead["startup_s"]["n"] >= 4
