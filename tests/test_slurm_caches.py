"""Which embedding caches a Slurm job reads: those of the jobs finished when it is submitted
(their writers have closed them), never one still being written. No cluster needed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from types import SimpleNamespace

from neobench.encoder.cache import CACHE_ENV, CACHE_FILE, READ_ENV
from neobench.study import store
from neobench.study.launchers.slurm import _command, finished_caches, job_cache
from neobench.study.plan import Job, Plan


def eval_job(out: Path, key: str, done: bool) -> Job:
    return Job("eval", key, ["eval"], out / "results", out / "logs" / f"{key}.log", None, done=done)


def with_cache(plan: Plan, job: Job, *suffixes: str) -> Path:
    file = job_cache(plan, job) / CACHE_FILE
    file.parent.mkdir(parents=True)
    for suffix in ("", *suffixes):
        Path(f"{file}{suffix}").write_bytes(b"")
    return file


def test_a_job_reads_the_caches_of_the_jobs_finished_before_it(tmp_path):
    keys = ["eval/a/1of2", "eval/a/2of2", "eval/b/1of2", "eval/b/2of2", "finetune/c"]
    jobs = [eval_job(tmp_path, key, done=key != "eval/b/2of2") for key in keys]
    finished, killed, running, pending, _ = jobs
    study = SimpleNamespace(output=tmp_path, eval=SimpleNamespace(benchmark="MTEB(eng, v1)"))
    plan = Plan(study, [], jobs)
    readable = with_cache(plan, finished)
    with_cache(plan, killed, "-wal")  # its writer died before folding the WAL in
    with_cache(plan, running)  # done, but Slurm still runs it: it may still be writing
    own = with_cache(plan, pending)  # what its failed first attempt left: its own, not read
    record = store.JobRecord(running.key, "queued", str(running.log), launcher="slurm")
    record.launcher_job_id = "41"
    store.write_record(plan, running, record)

    assert finished_caches(plan, {"41": "RUNNING"}) == [readable]
    assert finished_caches(plan, {}) == [readable, job_cache(plan, running) / CACHE_FILE]

    script = _command(plan, pending, [readable, own]).argv[2]
    assert f"export {CACHE_ENV}={shlex.quote(str(own.parent))};" in script
    assert f"export {READ_ENV}={shlex.quote(str(readable))};" in script


def test_a_record_written_before_launcher_job_id_still_names_its_slurm_job(tmp_path):
    job = eval_job(tmp_path, "eval/a/1of1", done=False)
    study = SimpleNamespace(output=tmp_path, eval=SimpleNamespace(benchmark="MTEB(eng, v1)"))
    plan = Plan(study, [], [job])
    old = {"key": job.key, "state": "queued", "log": str(job.log), "launcher": "slurm"}
    store.record_path(plan, job).parent.mkdir(parents=True)
    store.record_path(plan, job).write_text(json.dumps(old | {"slurm_job_id": "41"}))

    assert store.read_record(plan, job).launcher_job_id == "41"
    assert store.state(plan, job, {"slurm": {"41": "PENDING"}}) == "queued"
    assert store.state(plan, job, {"slurm": {}}) == "failed"
