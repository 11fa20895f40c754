"""A full-size fault-injection rehearsal of a study on the real local Slurm.

The plan of studies/table4-base.yaml (5 backbones x 3 seeds x 8 eval shards + the table: 136
jobs), each backbone replaced by a tiny model of its architecture built from a transformers config
(the study's `config:` models), a few fine-tuning steps, the mirror's MTEB(eng, v1) tasks and CPU
jobs. While the first round's jobs run, a watcher thread injects faults:

    scancel      N random running jobs of those with the most work left (a scancel whose job
                 completed before it took is late: owed again, for another job)
    requeue      M running fine-tunes (`scontrol requeue`), once they have trained a few steps
                 in the window and have as many left
    slurmd       slurmd killed (SIGKILL, by its pid file) mid-job, then started again
    time limit   a running eval's limit cut to just past its elapsed time (`scontrol update`)

and the fine-tunes, under a one-minute limit, requeue themselves at it (slurm.signal_s). Then
`neobench study run FILE --launcher slurm --wait` is repeated until every job is done (a bounded
number of rounds). The same plan then runs without faults in a second output folder (its
fine-tunes under a limit they never reach), and the two are compared: every fine-tune's loss
curve and final loss, every number of every task's scores, exactly or within 1e-6.

    python benchmarks/cluster_rehearsal.py --out rehearsal.json   # full size: ~2.5 h on 2 cores
    python benchmarks/cluster_rehearsal.py --backbones BERT --seeds 2 --shards 2 --scancel 1 \
        --requeue 1 --slurmd-kills 0 --time-limits 0 --out small.json

Without SLURM_CONF it starts its own one-node cluster (scripts/slurm-local.sh) in a temporary
folder and always stops it. Prints plain lines; the JSON report (--out) holds the jobs, the faults
(what, which job, when, survived), the rounds, the wall times, the overhead per job (submission;
Slurm's start of a job -> its first line of neobench output) and the comparison. Exit code 1 when
a job did not finish, a fault was not survived or a number differs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from neobench.study.kinds import JobKind

REPO = Path(__file__).resolve().parent.parent
SLURM_LOCAL = REPO / "scripts" / "slurm-local.sh"
NAME = "rehearsal"  # the study's name: Slurm job names are rehearsal-finetune, -eval, -table
TOLERANCE = 1e-6

# Tiny configs of studies/table4-base.yaml's five backbones, in its order. Every one reads
# bert-base-uncased's WordPiece (MiniLM's tokenizer, the only one offline; NeoBERT's own), so the
# special ids are its [PAD]=0, [CLS]=101, [SEP]=102.
_SHAPE = {
    "vocab_size": 30522,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}
_IDS = {"pad_token_id": 0, "bos_token_id": 101, "eos_token_id": 102}
BACKBONES: dict[str, dict[str, Any]] = {
    "BERT": {"model_type": "bert", **_SHAPE, "max_position_embeddings": 512},
    "RoBERTa": {
        "model_type": "roberta",
        **_SHAPE,
        **_IDS,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
    },
    # A stand-in: transformers' own NomicBERT (model_type nomic_bert: rotary positions, a gated
    # SiLU MLP, bias-free attention), which `config:` builds. nomic-ai/nomic-bert-2048 itself runs
    # its repository's remote code (tests/fixtures/nomic_bert), which `config:` cannot build: the
    # same architecture, other code.
    "NomicBERT": {
        "model_type": "nomic_bert",
        **_SHAPE,
        "max_position_embeddings": 2048,
        "pad_token_id": 0,
    },
    "ModernBERT": {
        "model_type": "modernbert",
        **_SHAPE,
        **_IDS,
        "cls_token_id": 101,
        "sep_token_id": 102,
        "max_position_embeddings": 512,
        "global_attn_every_n_layers": 2,
        "local_attention": 16,
    },
    # neobench's native NeoBERT (registered as model_type neobert).
    "NeoBERT": {
        "model_type": "neobert",
        **_SHAPE,
        "intermediate_size": 96,
        "max_length": 512,
        "pad_token_id": 0,
    },
}
FAULTS = ("requeue", "time-limit", "slurmd", "scancel")  # the order they take turns in
START = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - START:7.1f}s] {text}", flush=True)


# ----------------------------------------------------------------------------- the study


def mirror_tasks(data_dir: Path) -> list[str]:
    """The tasks of MTEB(eng, v1) whose every dataset repo the mirror holds."""
    from neobench.protocol.mirror import repo_needs
    from neobench.protocol.tasks import load_benchmark

    tasks = load_benchmark("MTEB(eng, v1)").tasks
    held = [t for t in tasks if all((data_dir / n.repo_id).is_dir() for n in repo_needs([t]))]
    return [t.metadata.name for t in held]


def write_study(
    folder: Path, args: argparse.Namespace, tasks: list[str], label: str, finetune_time: str
) -> Path:
    """The study file (and the tiny configs beside it) whose output is folder/<label>."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in args.backbones:
        (folder / f"{name}.json").write_text(json.dumps(BACKBONES[name], indent=1) + "\n")
    cpu = {"gpus": 0, "cpus": 1, "mem": "2G"}
    study = {
        "name": NAME,
        "output": str(folder.parent / label),
        "data_dir": str(args.data_dir),
        "models": [{"model": f"config:{n}.json", "name": n, "seed": 0} for n in args.backbones],
        "finetune": {
            "recipe": "neobert-mteb-2k",
            "overrides": {
                "datasets": "STSBENCHMARK",
                "max_steps": args.steps,
                "batch_size": 8,
                "max_seq_length": 64,
                "checkpoint_every": args.checkpoint_every,
            },
            "seeds": list(range(args.seeds)),
        },
        "eval": {"benchmark": "MTEB(eng, v1)", "tasks": tasks, "shards": args.shards},
        "reference": "paper",
        "baseline": args.backbones[0],
        "slurm": {
            "signal_s": args.signal_s,
            "startup_s": args.startup_s,
            "finetune": {**cpu, "time": finetune_time},
            "eval": {**cpu, "time": args.eval_time},
            "table": {**cpu, "time": args.eval_time},
        },
    }
    path = folder / f"{label}.yaml"
    head = f"# Written by benchmarks/cluster_rehearsal.py: the {label} run of the rehearsal.\n"
    path.write_text(head + yaml.safe_dump(study, sort_keys=False))
    return path


def plan_of(path: Path) -> Any:
    from neobench.study.plan import build_plan

    return build_plan(path)


# ----------------------------------------------------------------------------- the cluster


@contextmanager
def cluster(env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """SLURM_CONF's cluster, or a one-node cluster of our own, stopped on the way out."""
    if env.get("SLURM_CONF"):
        yield {"conf": env["SLURM_CONF"], "started_here": False}
        return
    folder = Path(tempfile.mkdtemp(prefix="neobench-rehearsal-slurm-"))
    try:
        done = subprocess.run(
            [str(SLURM_LOCAL), "start", str(folder)], capture_output=True, text=True
        )
        if done.returncode:
            raise SystemExit(f"cannot start a local Slurm cluster: {done.stderr.strip()}")
        env["SLURM_CONF"] = str(folder / "slurm.conf")
        say(f"started a one-node Slurm cluster in {folder}")
        yield {"conf": env["SLURM_CONF"], "started_here": True, "folder": str(folder)}
    finally:
        subprocess.run([str(SLURM_LOCAL), "stop", str(folder)], capture_output=True)
        say(f"stopped the cluster in {folder}")


def conf_value(conf: str, key: str) -> str | None:
    for line in Path(conf).read_text().splitlines():
        if line.strip().startswith(f"{key}="):
            return line.split("=", 1)[1].split()[0]
    return None


def slurm(argv: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"no answer in {timeout} s")


def node_state(env: dict[str, str]) -> str:
    return slurm(["sinfo", "-h", "-o", "%T"], env).stdout.strip() or "no answer"


# ----------------------------------------------------------------------------- watching

SQUEUE = [
    "squeue",
    "-h",
    "-r",
    "-t",
    "all",
    "-O",
    "JobArrayID:40|,JobID:20|,State:24|,Name:60|,StartTime:24|,SubmitTime:24|,"
    "EligibleTime:24|,TimeUsed:16|,Reason:60|",
]
ROW = ("id", "job_id", "state", "name", "start", "submit", "eligible", "used", "reason")
HEADER = re.compile(r"^# (\S+Z) Slurm job (\d+)$")
STARTED = {
    "RUNNING",
    "COMPLETING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
}
ENDED_BADLY = {"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}


def epoch(text: str) -> float | None:
    """Slurm's local time or our UTC header time -> seconds since the epoch."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def seconds(used: str) -> float:
    """squeue's TimeUsed ([D-][H:]M:SS) in seconds."""
    days, _, rest = used.rpartition("-")
    parts = [int(p) for p in rest.split(":") if p.isdigit()]
    total = 0
    for part in parts:
        total = total * 60 + part
    return int(days or 0) * 86400 + total


@dataclass
class Window:
    """One run of one Slurm job (a requeued job has several)."""

    key: str
    id: str  # Slurm's id as squeue -r shows it (12 or 12_3 for an array element)
    job_id: str  # the unique job id ($SLURM_JOB_ID)
    start: float
    submit: float | None
    eligible: float | None
    state: str = "RUNNING"
    used_s: float = 0.0
    curve_at_start: int = 0  # a fine-tune's loss-curve lines when first seen running


@dataclass
class LogWindow:
    job_id: str
    header: float | None
    first_output: float | None = None  # when its first line of neobench output was seen


@dataclass
class Fault:
    kind: str
    at_s: float  # seconds since the run began
    key: str | None
    id: str | None
    detail: str
    command: list[str]
    rc: int
    said: str = ""
    running: list[str] = field(default_factory=list)  # slurmd: the jobs running at the kill
    went_on: list[str] = field(default_factory=list)  # slurmd: ... still in the same window after
    node: str = ""  # slurmd: the node's state after the restart
    survived: bool | None = None
    outcome: str = ""
    at_epoch: float = field(default_factory=time.time)
    undone: bool = False  # scancel: the job ran again under the same id (it requeued itself)


class Watcher(threading.Thread):
    """Polls squeue and the study's logs every POLL_S (HURRIED_POLL_S while a fault is owed and
    one of the study's jobs runs); injects the faults it is given."""

    POLL_S = 1.0
    # While a fault is owed and a job runs: the span a fault may hit lasts only seconds when the
    # work is small (the reduced rehearsal's tiny BERT: 0.03 s a step, an eval shard in seconds).
    HURRIED_POLL_S = 0.2

    def __init__(self, output: Path, env: dict[str, str], injector: Injector | None) -> None:
        super().__init__(daemon=True)
        self.output, self.env, self.injector = output, env, injector
        self.ids: dict[str, str] = {}  # Slurm id -> study key (every id ever recorded)
        self.windows: dict[tuple[str, float], Window] = {}
        self.logs: dict[str, list[LogWindow]] = {}
        self._log_pos: dict[str, tuple[int, str]] = {}
        self.held: dict[str, float] = {}  # Slurm id -> when it was first seen held
        self.released: list[dict[str, Any]] = []
        self.rows: list[dict[str, str]] = []
        self.began = time.monotonic()
        self.stop = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.tick()
            except Exception as error:  # keep watching; the report names it
                self.error = f"{type(error).__name__}: {error}"
                say(f"watcher: {self.error}")
            self.stop.wait(self.HURRIED_POLL_S if self._hurried() else self.POLL_S)

    def _hurried(self) -> bool:
        return self.injector is not None and not self.injector.done and bool(self.running())

    def tick(self) -> None:
        done = slurm(SQUEUE, self.env, timeout=30)
        rows = [
            dict(zip(ROW, (f.strip() for f in line.split("|")), strict=False))
            for line in done.stdout.splitlines()
            if line.strip()
        ]
        if any(r["id"] not in self.ids and r["name"].startswith(NAME) for r in rows):
            self._read_records()
        self.rows = [r for r in rows if r["id"] in self.ids]
        now = time.time()
        for row in self.rows:
            self._window(row)
            self._held(row, now)
        self._read_logs(now)
        if self.injector is not None:
            self.injector.tick(self)

    def _read_records(self) -> None:
        for path in (self.output / "jobs").glob("*.json"):
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if rec.get("launcher") == "slurm" and rec.get("launcher_job_id"):
                self.ids[str(rec["launcher_job_id"])] = rec["key"]

    def _window(self, row: dict[str, str]) -> None:
        start = epoch(row["start"])
        if row["state"] not in STARTED or start is None:
            for win in self.windows.values():  # back in the queue: its window was requeued
                if win.id == row["id"] and win.state in ("RUNNING", "COMPLETING"):
                    win.state = "REQUEUED"
            return
        win = self.windows.get((row["id"], start))
        if win is None:
            key = self.ids[row["id"]]
            win = Window(
                key,
                row["id"],
                row["job_id"],
                start,
                epoch(row["submit"]),
                epoch(row["eligible"]),
                curve_at_start=self.curve(key),
            )
            self.windows[(row["id"], start)] = win
        win.state, win.used_s = row["state"], seconds(row["used"])

    def _held(self, row: dict[str, str], now: float) -> None:
        """A job Slurm holds (after a failed launch, say) would stop the study for ever: noted,
        and released after 30 s so that the rehearsal can go on."""
        if row["state"] != "PENDING" or "held" not in row["reason"].lower():
            self.held.pop(row["id"], None)
            return
        first = self.held.setdefault(row["id"], now)
        if now - first >= 30:
            said = slurm(["scontrol", "release", row["id"]], self.env)
            self.released.append(
                {
                    "id": row["id"],
                    "key": self.ids[row["id"]],
                    "reason": row["reason"],
                    "rc": said.returncode,
                }
            )
            say(f"{self.ids[row['id']]} (Slurm {row['id']}) held ({row['reason']}): released")
            self.held.pop(row["id"])

    def _read_logs(self, now: float) -> None:
        for path in (self.output / "logs").glob("*.log"):
            pos, rest = self._log_pos.get(path.name, (0, ""))
            try:
                if path.stat().st_size <= pos:
                    continue
                with path.open(errors="replace") as log:
                    log.seek(pos)
                    text = rest + log.read()
                    pos = log.tell()
            except OSError:
                continue
            lines = text.split("\n")
            self._log_pos[path.name] = (pos, lines.pop())
            windows = self.logs.setdefault(path.name, [])
            for line in lines:
                header = HEADER.match(line)
                if header:
                    windows.append(LogWindow(header.group(2), epoch(header.group(1))))
                elif windows and windows[-1].first_output is None and line.strip():
                    windows[-1].first_output = now

    def curve(self, key: str) -> int:
        if not key.startswith("finetune/"):
            return 0
        path = self.output / "finetune" / key.split("/", 1)[1] / "neobench_loss_curve.jsonl"
        try:
            return len(path.read_text().splitlines())
        except OSError:
            return 0

    def working_s(self, win: Window) -> float | None:
        """Seconds since the job's command printed its first line in this window (None: still
        starting)."""
        logs = self.logs.get(win.key.replace("/", "-") + ".log") or []
        last = logs[-1] if logs else None
        if last is None or last.job_id != win.job_id or last.first_output is None:
            return None
        return time.time() - last.first_output

    def running(self) -> list[Window]:
        """Our jobs running now (their current window)."""
        now = [(r["id"], epoch(r["start"])) for r in self.rows if r["state"] == "RUNNING"]
        return [self.windows[k] for k in now if k in self.windows]

    def at(self) -> float:
        return time.monotonic() - self.began


# ----------------------------------------------------------------------------- faults


class Injector:
    """Takes turns among the fault kinds still owed, one fault at most every ``gap_s``."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str], plan: Any) -> None:
        self.owed = {
            "scancel": args.scancel,
            "requeue": args.requeue,
            "slurmd": args.slurmd_kills,
            "time-limit": args.time_limits,
        }
        self.gap_s, self.min_steps, self.down_s = args.fault_gap, args.requeue_after, args.down_s
        self.steps = args.steps
        self.scancel_after = args.scancel_after
        self.env, self.rng = env, random.Random(args.fault_seed)
        self.costs = _shard_costs(plan)
        self.faults: list[Fault] = []
        self.refused: list[Fault] = []  # commands Slurm refused (the job had just ended)
        # A scancel Slurm took is a fault once its window ends CANCELLED; one whose job ended
        # COMPLETED (its last moments were under way) is late: owed again, for another job.
        self.unconfirmed: list[tuple[Fault, Window]] = []
        self.late: list[Fault] = []
        self.hit: set[str] = set()  # keys already faulted
        # The steps each running fine-tune was seen at while a requeue was owed: when the
        # requeue is never made, they show whether the polls stepped over its span.
        self.seen_steps: dict[str, list[int]] = {}
        self.last = -math.inf
        self.turn = 0

    @property
    def done(self) -> bool:
        return not any(self.owed.values()) and not self.unconfirmed

    def tick(self, watcher: Watcher) -> None:
        self.confirm()
        if self.done:
            return
        running = [w for w in watcher.running() if w.key not in self.hit]
        if self.owed["requeue"]:
            for win in running:
                if win.key.startswith("finetune/"):
                    self.seen_steps.setdefault(win.key, []).append(watcher.curve(win.key))
        if watcher.at() - self.last < self.gap_s:
            return
        for i in range(len(FAULTS)):
            kind = FAULTS[(self.turn + i) % len(FAULTS)]
            if self.owed[kind] and self._inject(kind, running, watcher):
                self.owed[kind] -= 1
                self.turn = (FAULTS.index(kind) + 1) % len(FAULTS)
                self.last = watcher.at()
                return

    def _inject(self, kind: str, running: list[Window], watcher: Watcher) -> bool:
        if kind == "requeue":
            tunes = [w for w in running if self._requeue_target(w, watcher, started=True)]
            return bool(tunes) and self._command(kind, tunes[0], ["scontrol", "requeue"], watcher)
        if kind == "time-limit":
            # One of the longest shards (a short one would end before its new limit came).
            longest = max(self.costs.values(), default=0)
            evals = [
                w
                for w in running
                if w.key.startswith("eval/")
                and w.used_s >= 3
                and self.costs.get(w.key, 0) >= longest / 2
            ]
            if not evals:
                return False
            win = evals[0]
            minutes = int(win.used_s // 60) + 1  # Slurm's limits are whole minutes
            update = ["scontrol", "update", f"JobId={win.id}", f"TimeLimit={minutes}"]
            detail = f"time limit cut to {minutes} min after {win.used_s:.0f} s of running"
            return self._command(kind, win, update, watcher, detail=detail, append_id=False)
        if kind == "slurmd":
            settled = [w for w in running if w.used_s >= 5]
            return bool(settled) and self._kill_slurmd(settled, watcher)
        candidates = [w for w in running if (watcher.working_s(w) or -1) >= self.scancel_after]
        # The jobs with the most work (fine-tunes, the larger eval shards): a short shard may
        # end in the instant between the poll that saw it running and the scancel.
        most = max((self._work(w.key) for w in candidates), default=0)
        candidates = [w for w in candidates if self._work(w.key) >= most / 2]
        if self.owed["requeue"]:
            # A requeue still owed needs a fine-tune with steps left, and its chance is a short
            # span of steps: a scancel leaves such fine-tunes to it (the evals after them are
            # there to cancel). The reduced rehearsal once cancelled one fine-tune while the
            # other was past its span, and the requeue was never made.
            candidates = [w for w in candidates if not self._requeue_target(w, watcher)]
        if not candidates:
            return False
        return self._command(kind, self.rng.choice(candidates), ["scancel"], watcher)

    def _work(self, key: str) -> float:
        """How much work a job has, to compare: a fine-tune the most, an eval shard its tasks'
        size, the table (a few files read) none."""
        return math.inf if key.startswith("finetune/") else self.costs.get(key, 0)

    def _requeue_target(self, win: Window, watcher: Watcher, started: bool = False) -> bool:
        """A fine-tune a requeue can test a restart on: steps left (a requeue at the last step
        lands in the final save, which finishes, so nothing restarts) and, with ``started``,
        a few steps trained in this window already."""
        if not win.key.startswith("finetune/"):
            return False
        step = watcher.curve(win.key)
        trained = step - win.curve_at_start >= self.min_steps if started else True
        return trained and step <= self.steps - self.min_steps

    def _command(
        self,
        kind: str,
        win: Window,
        argv: list[str],
        watcher: Watcher,
        *,
        detail: str = "",
        append_id: bool = True,
    ) -> bool:
        argv = [*argv, win.id] if append_id else argv
        done = slurm(argv, self.env)
        said = (done.stdout + done.stderr).strip()
        detail = detail or f"after {win.used_s:.0f} s of running"
        if win.key.startswith("finetune/"):
            detail += f", at step {watcher.curve(win.key)}"
        fault = Fault(kind, watcher.at(), win.key, win.id, detail, argv, done.returncode, said)
        self.hit.add(win.key)  # not tried twice, whatever came of it
        say(
            f"fault {kind}: {win.key} (Slurm {win.id}) {detail}: `{' '.join(argv)}` -> "
            f"rc {done.returncode}{': ' + said if said else ''}"
        )
        # Refused (the job ended in between, say): not a fault; another job gets it.
        (self.faults if done.returncode == 0 else self.refused).append(fault)
        if kind == "scancel" and done.returncode == 0:
            self.unconfirmed.append((fault, win))
        return done.returncode == 0

    def confirm(self) -> None:
        """Settles the scancels whose windows have ended (their state comes from squeue)."""
        for fault, win in list(self.unconfirmed):
            if win.state in ENDED_BADLY:
                self.unconfirmed.remove((fault, win))
            elif win.state == "COMPLETED":
                self.unconfirmed.remove((fault, win))
                self.faults.remove(fault)
                fault.outcome = "late: the job completed before the scancel reached it"
                self.late.append(fault)
                self.owed[fault.kind] += 1
                say(f"fault {fault.kind}: {fault.key} (Slurm {fault.id}) {fault.outcome}")

    def _kill_slurmd(self, running: list[Window], watcher: Watcher) -> bool:
        conf = self.env["SLURM_CONF"]
        pid_file = Path(conf_value(conf, "SlurmdPidFile") or "")
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGKILL)
        for _ in range(50):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        killed_at = watcher.at()
        time.sleep(self.down_s)
        done = slurm(["slurmd", "-f", conf], self.env)
        state = "?"
        for _ in range(60):  # the node answers again
            state = node_state(self.env)
            if state in ("idle", "mixed", "allocated"):
                break
            time.sleep(0.5)
        keys = [w.key for w in running]
        # The jobs went on through it: Slurm still shows each in the window it was in.
        listed = slurm(SQUEUE, self.env, timeout=30).stdout.splitlines()
        rows = [dict(zip(ROW, (f.strip() for f in x.split("|")), strict=False)) for x in listed]
        now = {r["id"]: (r["state"], epoch(r["start"])) for r in rows if r.get("start")}
        went_on = [
            w.key
            for w in running
            if now.get(w.id, ("", None))[1] == w.start
            and now[w.id][0] in ("RUNNING", "COMPLETING", "COMPLETED")
        ]
        detail = (
            f"slurmd pid {pid} SIGKILLed with {len(keys)} job(s) running, started again "
            f"after {self.down_s:.0f} s (rc {done.returncode}); node {state}; "
            f"{len(went_on)} of {len(keys)} job(s) went on in the same window"
        )
        argv = ["kill", "-KILL", str(pid), ";", "slurmd", "-f", conf]
        fault = Fault(
            "slurmd",
            killed_at,
            None,
            None,
            detail,
            argv,
            done.returncode,
            (done.stdout + done.stderr).strip(),
            running=keys,
        )
        fault.went_on, fault.node = went_on, state
        self.faults.append(fault)
        say(f"fault slurmd: {detail}; running: {', '.join(keys)}")
        return done.returncode == 0


def _shard_costs(plan: Any) -> dict[str, int]:
    """eval key -> the size of its shard's tasks (mteb's statistics), to pick a long one."""
    from neobench.protocol.tasks import task_cost
    from neobench.study import conflicts

    tasks = {t.metadata.name: t for t in conflicts.eval_problems(plan.study.eval, []) or []}
    return {
        j.key: sum(task_cost(tasks[t]) for t in j.tasks if t in tasks)
        for j in plan.jobs
        if j.kind is JobKind.EVAL
    }


# ----------------------------------------------------------------------------- rounds


def run_rounds(
    label: str,
    path: Path,
    env: dict[str, str],
    args: argparse.Namespace,
    watcher: Watcher,
    deadline: float,
) -> list[dict[str, Any]]:
    """Round 1 submits (no --wait, timed: the submission); then --wait rounds until done."""
    rounds: list[dict[str, Any]] = []
    for number in range(1, args.max_rounds + 2):
        wait = number > 1
        argv = [sys.executable, "-m", "neobench", "study", "run", str(path), "--launcher", "slurm"]
        argv += ["--wait"] if wait else []
        began = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=max(deadline - time.monotonic(), 1),
            )
            rc, text = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            rc, text = 124, f"{expired.stdout or ''}{expired.stderr or ''} (past --timeout-min)"
        found = re.search(r"(\d+) job\(s\) submitted", text)
        entry = {
            "round": number,
            "wait": wait,
            "rc": rc,
            "wall_s": time.monotonic() - began,
            "submitted": int(found.group(1)) if found else None,
            "last_lines": [" ".join(x.split()) for x in text.strip().splitlines()[-4:]],
        }
        rounds.append(entry)
        say(
            f"{label} round {number} ({'--wait' if wait else 'submit'}): rc {rc}, "
            f"{entry['submitted']} submitted, {entry['wall_s']:.0f} s"
        )
        if rc == 124:
            break
        if wait and rc == 0 and not plan_of(path).pending:
            break
        if watcher.error:
            say(f"watcher: {watcher.error}")
    return rounds


def one_run(
    label: str,
    path: Path,
    env: dict[str, str],
    args: argparse.Namespace,
    injector: Injector | None,
    deadline: float,
) -> dict[str, Any]:
    plan = plan_of(path)
    output = plan.study.output
    watcher = Watcher(output, env, injector)
    began = time.monotonic()
    watcher.start()
    try:
        rounds = run_rounds(label, path, env, args, watcher, deadline)
    finally:
        watcher.stop.set()
        watcher.join(timeout=30)
        _cancel_left(watcher, env)
    final = plan_of(path)
    result = {
        "output": str(output),
        "study": str(path),
        "jobs": len(final.jobs),
        "done": sum(j.done for j in final.jobs),
        "not_done": [j.key for j in final.pending],
        "table": str(final.job("table").output) if final.job("table").output.is_file() else None,
        "rounds": rounds,
        "wall_s": time.monotonic() - began,
        "windows": _windows(watcher, final),
        "overhead": _overhead(watcher, rounds, len(final.jobs)),
        "held_and_released": watcher.released,
        "failed_windows": _failures(output, watcher, injector.faults if injector else []),
        "watcher_error": watcher.error,
    }
    result["_watcher"] = watcher
    return result


def _failures(output: Path, watcher: Watcher, faults: list[Fault]) -> list[dict[str, Any]]:
    """Every start of a job that ended badly, the fault injected into it (if one was) and the
    last line of its submitit log that says why."""
    started = {log.job_id for logs in watcher.logs.values() for log in logs}
    by_id = {f.id: f.kind for f in faults if f.id}
    found = []
    for win in sorted(watcher.windows.values(), key=lambda w: w.start):
        if win.state not in ENDED_BADLY or win.job_id not in started:
            continue  # never started (cancelled in the queue: a dependency failed)
        err = _text(output / "slurm" / win.id / f"{win.id}_0_log.err").splitlines()
        said = [x.strip() for x in err if "Error" in x or "CANCELLED AT" in x or "JobFailed" in x]
        found.append(
            {
                "key": win.key,
                "id": win.id,
                "state": win.state,
                "fault": by_id.get(win.id),
                "why": said[-1] if said else None,
            }
        )
    return found


def _cancel_left(watcher: Watcher, env: dict[str, str]) -> None:
    """On the way out (a round past the deadline), nothing of ours is left queued."""
    live = [r["id"] for r in watcher.rows if r["state"] in ("PENDING", "RUNNING", "REQUEUED")]
    if live:
        slurm(["scancel", *live], env)
        say(f"cancelled what was left: {', '.join(live)}")


def _windows(watcher: Watcher, plan: Any) -> dict[str, Any]:
    """Per job: how many times it started (log headers), and the Slurm ids it had."""
    per_key: dict[str, dict[str, Any]] = {}
    for job in plan.jobs:
        logs = watcher.logs.get(job.log.name, [])
        ids = sorted({i for i, k in watcher.ids.items() if k == job.key})
        per_key[job.key] = {"starts": len(logs), "slurm_ids": ids}
    return per_key


def stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
    return {
        "n": len(values),
        "median": round(statistics.median(values), 2),
        "mean": round(statistics.fmean(values), 2),
        "p90": round(p90, 2),
        "min": round(ordered[0], 2),
        "max": round(ordered[-1], 2),
    }


def _overhead(watcher: Watcher, rounds: list[dict[str, Any]], jobs: int) -> dict[str, Any]:
    """Submission: round 1's wall time per job it submitted. Start-up of each start of a job:
    Slurm's StartTime -> the job script's header line (submitit's Python) -> the first line of
    neobench output (seen by polling the log every second, so +- 1 s). Queue: eligible (its
    dependencies met) -> started: with 2 CPUs mostly waiting for one, not overhead."""
    by_job_id: dict[str, list[Window]] = {}
    for win in watcher.windows.values():
        by_job_id.setdefault(win.job_id, []).append(win)
    startup, submitit, neobench, queue = [], [], [], []
    for logs in watcher.logs.values():
        for log in logs:
            wins = [
                w
                for w in by_job_id.get(log.job_id, [])
                if log.header is not None and w.start <= log.header + 1
            ]
            if not wins:
                continue
            win = max(wins, key=lambda w: w.start)  # the window this header opened
            submitit.append(log.header - win.start)
            if win.eligible is not None:
                queue.append(win.start - win.eligible)
            if log.first_output is not None:
                startup.append(log.first_output - win.start)
                neobench.append(log.first_output - log.header)
    first = rounds[0] if rounds else {}
    submitted = first.get("submitted") or 0
    return {
        "submission_s_per_job": round(first["wall_s"] / submitted, 3) if submitted else None,
        "submission_round_s": round(first.get("wall_s", 0.0), 1),
        "submitted_in_round_1": submitted,
        "jobs": jobs,
        "startup_s": stats(startup),
        "slurm_start_to_job_script_s": stats(submitit),
        "job_script_to_first_output_s": stats(neobench),
        "eligible_to_start_s": stats(queue),
        "starts": len(submitit),
    }


# ----------------------------------------------------------------------------- comparison


def finetunes(output: Path) -> dict[str, dict[str, Any]]:
    """finetune folder -> its card's status and final loss, and its loss curve."""
    found = {}
    for card_path in sorted((output / "finetune").glob("*/neobench_run_card.yaml")):
        card = yaml.safe_load(card_path.read_text())
        curve_path = card_path.parent / "neobench_loss_curve.jsonl"
        curve = [json.loads(x)["loss"] for x in curve_path.read_text().splitlines() if x.strip()]
        found[card_path.parent.name] = {
            "status": card.get("status"),
            "steps": card.get("steps"),
            "final_loss": card.get("final_loss"),
            "curve": curve,
        }
    return found


def _numbers(value: Any, prefix: str, out: dict[str, float]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        out[prefix] = float(value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            _numbers(inner, f"{prefix}/{key}", out)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            tag = inner.get("hf_subset", i) if isinstance(inner, dict) else i
            _numbers(inner, f"{prefix}/{tag}", out)


def scores(output: Path) -> tuple[dict[str, dict[str, float]], list[str]]:
    """'<finetune folder>/<task>' -> every number of the task's scores; and the problems (a
    model evaluated into two result folders)."""
    found: dict[str, dict[str, float]] = {}
    folders: dict[str, set[Path]] = {}
    for card_path in sorted((output / "results").glob("*/*/neobench/run-*.yaml")):
        card = yaml.safe_load(card_path.read_text())
        source = Path(card["config"]["model"]).name
        folder = card_path.parent.parent
        folders.setdefault(source, set()).add(folder)
        for task in (card.get("shard") or {}).get("tasks") or card["config"].get("tasks") or []:
            result = folder / f"{task}.json"
            if result.is_file():
                numbers: dict[str, float] = {}
                _numbers(json.loads(result.read_text())["scores"], "scores", numbers)
                found[f"{source}/{task}"] = numbers
    problems = [f"{s}: results in {len(f)} folders" for s, f in folders.items() if len(f) > 1]
    return found, problems


def compare(faulted: Path, reference: Path, tasks: list[str], plan: Any) -> dict[str, Any]:
    tuned_f, tuned_r = finetunes(faulted), finetunes(reference)
    tunes = {}
    for name in sorted(set(tuned_f) | set(tuned_r)):
        a, b = tuned_f.get(name), tuned_r.get(name)
        entry: dict[str, Any] = {
            "faulted": a and {k: v for k, v in a.items() if k != "curve"},
            "reference": b and {k: v for k, v in b.items() if k != "curve"},
        }
        if a and b and len(a["curve"]) == len(b["curve"]):
            entry["curve_max_abs_diff"] = max(
                (abs(x - y) for x, y in zip(a["curve"], b["curve"], strict=True)), default=0.0
            )
            entry["final_loss_equal"] = a["final_loss"] == b["final_loss"]
            entry["equal"] = a["status"] == b["status"] == "complete" and (
                entry["curve_max_abs_diff"] <= TOLERANCE
            )
        else:
            entry["equal"] = False
        tunes[name] = entry
    score_f, problems_f = scores(faulted)
    score_r, problems_r = scores(reference)
    expected = {
        f"{Path(j.argv[j.argv.index('--model') + 1]).name}/{t}"
        for j in plan.jobs
        if j.kind is JobKind.EVAL
        for t in j.tasks
    }
    missing = sorted((expected - set(score_f)) | (expected - set(score_r)))
    numbers = diffs = exact = 0
    worst: list[tuple[float, str]] = []
    for key in sorted(expected & set(score_f) & set(score_r)):
        a, b = score_f[key], score_r[key]
        for metric in sorted(set(a) | set(b)):
            if metric.endswith("evaluation_time") or "/evaluation_time" in metric:
                continue
            numbers += 1
            if metric not in a or metric not in b:
                diffs += 1
                worst.append((math.inf, f"{key} {metric}: on one side only"))
                continue
            gap = abs(a[metric] - b[metric])
            exact += gap == 0
            if gap > TOLERANCE:
                diffs += 1
                worst.append((gap, f"{key} {metric}: {a[metric]} vs {b[metric]}"))
    return {
        "finetunes": tunes,
        "finetunes_equal": all(t["equal"] for t in tunes.values()) and bool(tunes),
        "scores": {
            "task_results_expected": len(expected),
            "missing": missing,
            "numbers_compared": numbers,
            "exactly_equal": exact,
            "beyond_tolerance": diffs,
            "worst": [text for _, text in sorted(worst, reverse=True)[:10]],
            "problems": problems_f + problems_r,
        },
        "scores_equal": not missing and diffs == 0 and numbers > 0 and not problems_f + problems_r,
    }


# ----------------------------------------------------------------------------- survival


def survival(faults: list[Fault], faulted: dict[str, Any], watcher: Watcher, plan: Any) -> None:
    """A fault was survived when the job it hit (every job running, for slurmd) ends done."""
    done = {j.key for j in plan.jobs if j.done}
    for fault in faults:
        keys = fault.running if fault.kind == "slurmd" else [fault.key]
        after = [w for w in watcher.windows.values() if w.key in keys]
        fault.survived = fault.rc == 0 and bool(keys) and all(k in done for k in keys)
        if fault.kind == "slurmd":  # and the jobs went on through it, on a node back up
            up = fault.node in ("idle", "mixed", "allocated")
            fault.survived = fault.survived and up and fault.went_on == keys
        starts = {k: faulted["windows"][k]["starts"] for k in keys if k in faulted["windows"]}
        fault.outcome = (
            f"{'survived' if fault.survived else 'NOT survived'}: done at the end "
            f"{[k for k in keys if k in done]}; starts of the job: {starts}; "
            f"Slurm states seen: {sorted({w.state for w in after})}"
        )
        if fault.kind == "time-limit" and fault.id:
            fault.outcome += "; " + _time_limit_outcome(Path(faulted["output"]), fault.id)
        if fault.kind == "scancel":
            again = [w for w in after if w.id == fault.id and w.start > fault.at_epoch]
            fault.undone = bool(again)
            if again:
                fault.outcome += (
                    "; UNDONE: the job ran again under the same Slurm id after the scancel "
                    f"({len(again)} more start(s)): it requeued itself"
                )


def _time_limit_outcome(output: Path, slurm_id: str) -> str:
    """What the cut limit did: a notice (SIGUSR2) to the job, Slurm's TIMEOUT, or nothing (the
    job ended first)."""
    folder = output / "slurm" / slurm_id
    out = _text(folder / f"{slurm_id}_0_log.out") + _text(folder / f"{slurm_id}_0_log.err")
    said = []
    if "the time limit is near" in out:
        said.append("the job got the notice (SIGUSR2)")
    if "requeued" in out and "progress" in out:
        said.append("it requeued itself")
    if "DUE TO TIME LIMIT" in out:
        said.append("Slurm ended it at the limit (TIMEOUT)")
    if "the time limit came before the job made any progress" in out:
        said.append("it failed: no progress in the window")
    return ", ".join(said) or "the job ended before its new limit came"


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def self_requeues(output: Path, watcher: Watcher, key: str) -> int:
    ids = [i for i, k in watcher.ids.items() if k == key]
    return sum(
        _text(output / "slurm" / i / f"{i}_0_log.out").count("in this window; requeued")
        for i in ids
    )


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--backbones",
        default=",".join(BACKBONES),
        help=f"comma-separated, of {', '.join(BACKBONES)} (default: all)",
    )
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument(
        "--tasks",
        default=None,
        help="comma-separated mteb tasks (default: the mirror's MTEB(eng, v1) tasks)",
    )
    p.add_argument("--steps", type=int, default=120, help="fine-tuning steps (default 120)")
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument(
        "--finetune-time",
        default="0:01:00",
        help="the fine-tunes' limit in the faulted run: they requeue themselves at it",
    )
    p.add_argument(
        "--reference-finetune-time",
        default="0:30:00",
        help="the fine-tunes' limit in the reference run (never reached)",
    )
    p.add_argument("--eval-time", default="0:10:00", help="eval and table jobs' limit")
    p.add_argument("--signal-s", type=int, default=15, help="slurm.signal_s (default 15)")
    p.add_argument("--startup-s", type=int, default=5, help="slurm.startup_s (default 5)")
    p.add_argument("--scancel", type=int, default=5, help="random running jobs scancelled")
    p.add_argument("--requeue", type=int, default=2, help="running fine-tunes requeued")
    p.add_argument(
        "--requeue-after",
        type=int,
        default=5,
        help="steps a fine-tune trains in its window before it may be requeued",
    )
    p.add_argument("--slurmd-kills", type=int, default=1, choices=(0, 1))
    p.add_argument("--down-s", type=float, default=5.0, help="how long slurmd stays dead")
    p.add_argument(
        "--time-limits",
        type=int,
        default=1,
        choices=(0, 1),
        help="a running eval's time limit cut to just past its elapsed time",
    )
    p.add_argument(
        "--scancel-after",
        type=float,
        default=3.0,
        help="seconds a job works (after its first line of output) before it may be scancelled",
    )
    p.add_argument("--fault-gap", type=float, default=45.0, help="seconds between two faults")
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the random choices")
    p.add_argument(
        "--reference",
        choices=("run", "none"),
        default="run",
        help="run the same plan without faults and compare (default), or not",
    )
    p.add_argument("--max-rounds", type=int, default=8, help="`study run --wait` rounds at most")
    p.add_argument("--timeout-min", type=float, default=150, help="the whole rehearsal at most")
    p.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data" / "hub")
    p.add_argument(
        "--work",
        type=Path,
        default=None,
        help="work folder (default: a new temporary folder; never in the repository)",
    )
    p.add_argument("--out", type=Path, required=True, help="the JSON report")
    args = p.parse_args(argv)
    args.backbones = [b.strip() for b in args.backbones.split(",") if b.strip()]
    unknown = [b for b in args.backbones if b not in BACKBONES]
    if unknown or not args.backbones:
        p.error(f"--backbones {unknown or 'empty'}: choose from {', '.join(BACKBONES)}")
    args.data_dir = args.data_dir.resolve()
    if not args.data_dir.is_dir():
        p.error(f"--data-dir {args.data_dir}: no such folder (the shared data mirror)")
    args.work = (args.work or Path(tempfile.mkdtemp(prefix="neobench-rehearsal-"))).resolve()
    if args.work.is_relative_to(REPO):
        p.error(f"--work {args.work}: inside the repository; give a folder outside it")
    return args


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return env


def rehearse(args: argparse.Namespace, report: dict[str, Any]) -> None:
    deadline = time.monotonic() + args.timeout_min * 60
    env = environment()
    tasks = args.tasks.split(",") if args.tasks else mirror_tasks(args.data_dir)
    study_dir = args.work / "study"
    faulted_path = write_study(study_dir, args, tasks, "faulted", args.finetune_time)
    plan = plan_of(faulted_path)
    kinds = {k.value: sum(j.kind is k for j in plan.jobs) for k in JobKind}
    report["plan"] = {
        "backbones": args.backbones,
        "seeds": args.seeds,
        "shards": args.shards,
        "steps": args.steps,
        "tasks": tasks,
        "jobs": len(plan.jobs),
        **kinds,
        "work": str(args.work),
        "study": str(faulted_path),
    }
    say(f"plan: {len(plan.jobs)} jobs ({kinds}); {len(tasks)} tasks; work folder {args.work}")
    with cluster(env) as info:
        report["cluster"] = {**info, "node": node_state(env)}
        injector = Injector(args, env, plan)
        try:
            faulted = one_run("faulted", faulted_path, env, args, injector, deadline)
        finally:  # what was injected, also when the run was cut short
            report["faults"] = [asdict(f) for f in injector.faults]
        watcher = faulted.pop("_watcher")
        injector.confirm()  # the states of the last poll
        final = plan_of(faulted_path)
        survival(injector.faults, faulted, watcher, final)
        report["faulted"] = faulted
        report["faults"] = [asdict(f) for f in injector.faults]
        report["faults_owed"] = {k: n for k, n in injector.owed.items() if n}
        if injector.owed["requeue"]:
            report["finetune_steps_seen"] = injector.seen_steps
        report["fault_commands_refused"] = [asdict(f) for f in injector.refused]
        report["faults_late"] = [asdict(f) for f in injector.late]
        report["faults_unconfirmed"] = [asdict(f) for f, _ in injector.unconfirmed]
        report["finetune_windows"] = {
            j.key: {
                "starts": faulted["windows"][j.key]["starts"],
                "self_requeues": self_requeues(final.study.output, watcher, j.key),
                "faults": [f.kind for f in injector.faults if j.key in (f.key, *f.running)],
            }
            for j in final.jobs
            if j.kind is JobKind.FINETUNE
        }
        if args.reference == "run":
            ref_path = write_study(
                study_dir, args, tasks, "reference", args.reference_finetune_time
            )
            reference = one_run("reference", ref_path, env, args, None, deadline)
            reference.pop("_watcher")
            report["reference"] = reference
            report["compare"] = compare(
                final.study.output, plan_of(ref_path).study.output, tasks, final
            )


def verdict(report: dict[str, Any], args: argparse.Namespace) -> list[str]:
    problems = []
    for label in ("faulted", "reference"):
        run = report.get(label)
        if run is None:
            continue
        if run["not_done"]:
            problems.append(f"{label}: {len(run['not_done'])} job(s) not done: {run['not_done']}")
        if not run["table"]:
            problems.append(f"{label}: no table")
        if label == "reference" and run["failed_windows"]:
            problems.append(f"reference: not fault-free: {run['failed_windows']}")
        if run["held_and_released"]:
            problems.append(
                f"{label}: jobs held by Slurm, released by hand: {run['held_and_released']}"
            )
    if report.get("faults_owed"):
        seen = report.get("finetune_steps_seen")
        polls = f"; fine-tune steps at each poll while a requeue was owed: {seen}" if seen else ""
        owed = report["faults_owed"]
        problems.append(f"faults not injected (no fitting running job): {owed}{polls}")
    for fault in report.get("faults_unconfirmed", []):
        problems.append(f"fault scancel on {fault['key']}: the end of its window was never seen")
    for fault in report.get("faults", []):
        if fault["survived"] is None:
            problems.append(f"fault {fault['kind']} on {fault['key']}: not assessed (cut short)")
        elif not fault["survived"]:
            problems.append(
                f"fault {fault['kind']} on {fault['key']}: not survived ({fault['outcome']})"
            )
    if args.reference == "run" and "compare" in report:
        comp = report["compare"]
        if not comp["finetunes_equal"]:
            bad = [k for k, v in comp["finetunes"].items() if not v["equal"]]
            problems.append(f"fine-tunes differ from the reference: {bad}")
        if not comp["scores_equal"]:
            problems.append(f"scores differ from the reference: {comp['scores']}")
    elif args.reference == "run":
        problems.append("the reference run did not happen")
    return problems


def summary(report: dict[str, Any]) -> None:
    plan = report.get("plan", {})
    say(
        f"jobs: {plan.get('jobs')} ({plan.get('finetune')} finetune, {plan.get('eval')} eval, "
        f"{plan.get('table')} table)"
    )
    for label in ("faulted", "reference"):
        run = report.get(label)
        if run:
            over = run["overhead"]
            say(
                f"{label}: {run['done']}/{run['jobs']} done in {len(run['rounds'])} round(s), "
                f"{run['wall_s'] / 60:.1f} min; submission {over['submission_s_per_job']} s/job; "
                f"start-up (Slurm start -> first output) {over['startup_s']}"
            )
    faults = report.get("faults", [])
    survived = sum(bool(f["survived"]) for f in faults)
    say(f"faults: {len(faults)} injected, {survived} survived")
    for fault in faults:
        say(f"  {fault['kind']} {fault['key'] or ''} ({fault['detail']}): {fault['outcome']}")
    for fault in report.get("faults_late", []):
        say(f"  {fault['kind']} {fault['key']} ({fault['detail']}): {fault['outcome']}; owed again")
    tunes = report.get("finetune_windows", {})
    several = sum(v["starts"] > 1 for v in tunes.values())
    itself = sum(v["self_requeues"] > 0 for v in tunes.values())
    say(
        f"fine-tunes started more than once: {several} of {len(tunes)}; requeued themselves at "
        f"the time limit: {itself}"
    )
    for label in ("faulted", "reference"):
        bad = [w for w in (report.get(label) or {}).get("failed_windows", []) if not w["fault"]]
        for w in bad:
            say(
                f"{label}: {w['key']} (Slurm {w['id']}) ended {w['state']}, no fault injected: "
                f"{w['why']}"
            )
    comp = report.get("compare")
    if comp:
        s = comp["scores"]
        say(
            f"fine-tunes equal to the reference: {comp['finetunes_equal']}; scores: "
            f"{s['numbers_compared']} numbers, {s['exactly_equal']} exactly equal, "
            f"{s['beyond_tolerance']} beyond {TOLERANCE}, {len(s['missing'])} missing"
        )
    for problem in report.get("problems", []):
        say(f"PROBLEM: {problem}")
    say(
        f"{'OK' if report.get('ok') else 'FAILED'}; wall time {report.get('wall_s', 0) / 60:.1f} "
        "min"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A SIGTERM (kill, the end of a nohup session) ends through the finally blocks: the cluster
    # this script started is stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    report: dict[str, Any] = {"argv": sys.argv, "started": datetime.now().isoformat()}
    began = time.monotonic()
    try:
        rehearse(args, report)
    except BaseException as error:
        report["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        report["wall_s"] = time.monotonic() - began
        report["problems"] = verdict(report, args) + (
            [report["error"]] if "error" in report else []
        )
        report["ok"] = not report["problems"]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
        summary(report)
        say(f"report: {args.out}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
