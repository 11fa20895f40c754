"""The one-node Slurm cluster of scripts/slurm-local.sh: real slurmctld, slurmd and munged on
localhost, driven through submitit as `neobench study run --launcher slurm` will drive it."""

import os
import subprocess

import pytest

pytestmark = pytest.mark.slurm


def test_a_submitit_job_runs_on_the_local_cluster(slurm_cluster, tmp_path, monkeypatch):
    import submitit

    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    executor = submitit.AutoExecutor(folder=tmp_path / "logs", cluster="slurm")
    executor.update_parameters(timeout_min=5, cpus_per_task=1, slurm_partition="debug")
    # A command, not a test-module function: the job's Python cannot import tests/.
    show = submitit.helpers.CommandFunction(["bash", "-c", 'echo "$SLURM_JOB_ID $SLURM_CONF"'])
    job = executor.submit(show)
    job_id, conf = job.result().split()
    assert job_id == job.job_id  # it ran inside that Slurm job
    assert conf == str(slurm_cluster.conf)


def test_the_cluster_is_local_and_stops_by_pid(tmp_path):
    """A second cluster in its own folder: listens only where its config says, and `stop`
    leaves none of its daemons running."""
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "slurm-local.sh")
    folder = tmp_path / "cluster"
    done = subprocess.run([script, "start", str(folder)], capture_output=True, text=True)
    if done.returncode:
        if os.environ.get("CI"):
            pytest.fail(done.stderr)
        pytest.skip(done.stderr)
    pids = {p.stem: int(p.read_text()) for p in (folder / "run").glob("*.pid")}
    try:
        assert set(pids) == {"munged", "slurmctld", "slurmd"}
        conf = (folder / "slurm.conf").read_text()
        assert "NodeAddr=127.0.0.1" in conf and "(127.0.0.1)" in conf
        assert f"AuthInfo=socket={folder}/munge/munge.socket" in conf  # not the system's munge
        env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
        assert state.stdout.strip() in {"idle", "mixed"}
    finally:
        subprocess.run([script, "stop", str(folder)], check=True)
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # each daemon it started is gone
    assert not list((folder / "run").glob("*.pid"))
