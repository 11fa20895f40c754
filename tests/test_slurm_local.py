"""The one-node Slurm cluster of scripts/slurm-local.sh: real slurmctld, slurmd and munged on
localhost, driven through submitit as `neobench study run --launcher slurm` will drive it."""

import os
import signal
import subprocess

import pytest
from conftest import wait_for

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
        assert not _running(pid)  # each daemon it started has ended
    assert not list((folder / "run").glob("*.pid"))


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (one that has ended, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as st:
            return st.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _live_processes_of(conf: str) -> list[int]:
    """Processes (not zombies) whose environment names this cluster's SLURM_CONF."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as env, open(f"/proc/{entry}/stat") as st:
                named = f"SLURM_CONF={conf}".encode() in env.read().split(b"\0")
                zombie = st.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if named and not zombie:
            found.append(int(entry))
    return found


def test_stop_ends_the_job_steps_a_killed_slurmd_left(tmp_path):
    """slurmd killed with SIGKILL mid-job leaves its slurmstepd and the job's tasks running;
    `stop` ends them too (found by this cluster's SLURM_CONF in their environment)."""
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "slurm-local.sh")
    folder = tmp_path / "cluster"
    done = subprocess.run([script, "start", str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    conf = str(folder / "slurm.conf")
    env = {**os.environ, "SLURM_CONF": conf}
    try:
        job = ["sbatch", "--wrap", "sleep 300", "-c", "1", "--mem", "100M"]
        job += ["-o", str(tmp_path / "job.out")]
        subprocess.run(job, env=env, check=True, capture_output=True)
        wait_for(lambda: _live_processes_of(conf), "the job's step to run", poll_s=0.1)
        os.kill(int((folder / "run" / "slurmd.pid").read_text()), signal.SIGKILL)
    finally:
        subprocess.run([script, "stop", str(folder)], check=True)
    assert _live_processes_of(conf) == []  # `stop` returns once they have ended
