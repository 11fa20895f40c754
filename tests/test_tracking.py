"""`finetune --report-to`: the stock trainer's tracker, given the recipe and run card as config.

TensorBoard runs for real (its package is in the test extra): its loss scalars are the loss curve,
step by step. wandb and trackio are not installed here: asking for one is refused before any data
or model loads, with the package to install.
"""

import json
import sys
from types import SimpleNamespace

import pytest
import yaml
from test_finetune import TINY, config, curve

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.train import inputs as train_inputs
from neobench.train import tracking
from neobench.train.finetune import finetune


def _installed_but(monkeypatch, *missing):
    """Packages look installed except ``missing`` (what this machine has does not matter)."""
    real = train_inputs.importlib.util.find_spec

    def find_spec(name, *args):
        return None if name in missing else real(name, *args)

    monkeypatch.setattr(train_inputs.importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize("tracker", ["wandb", "trackio"])
def test_a_tracker_that_is_not_installed_is_refused_with_its_package(
    capsys, monkeypatch, minilm, tmp_path, tracker
):
    _installed_but(monkeypatch, tracker)
    out = tmp_path / "o"
    code = main(["finetune", "--model", str(minilm), "--output", str(out), "--report-to", tracker])
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())
    assert code == 2 and "Traceback" not in text
    assert f"--report-to {tracker}: the {tracker} package is not installed" in text
    assert f"pip install {tracker}" in text
    assert not out.exists()  # refused before anything was written


def test_an_unknown_tracker_gets_did_you_mean(tmp_path, minilm):
    with pytest.raises(NeobenchError, match=r"Unknown --report-to value 'tensorbord'\. Did you "
                       r"mean 'tensorboard'"):  # fmt: skip
        finetune(config(minilm, tmp_path / "o", report_to="tensorbord"))


def test_wandb_is_offline_unless_its_mode_is_set(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    tracking.prepare("wandb")
    assert tracking.os.environ["WANDB_MODE"] == "offline"
    monkeypatch.setenv("WANDB_MODE", "online")
    tracking.prepare("wandb")
    assert tracking.os.environ["WANDB_MODE"] == "online"
    monkeypatch.delenv("WANDB_MODE")
    tracking.prepare("tensorboard")
    assert "WANDB_MODE" not in tracking.os.environ


def test_wandb_and_trackio_get_the_config_on_the_run_they_opened(monkeypatch):
    """What the integrations call themselves: the module-level config of the open run."""
    updates = []
    config = {"neobench_recipe": {"sha256": "abc"}, "neobench_run_card": {"status": "running"}}
    for name in ("wandb", "trackio"):
        fake = SimpleNamespace(config=SimpleNamespace(update=lambda c, **kw: updates.append(c)))
        monkeypatch.setitem(sys.modules, name, fake)
        callback = tracking.RunConfig(name, None, config)
        callback.on_train_begin(None, SimpleNamespace(is_world_process_zero=True), None)
        callback.on_train_begin(None, SimpleNamespace(is_world_process_zero=False), None)
    assert updates == [config, config]  # once each, from the main process only


@pytest.mark.slow
def test_tensorboard_loss_scalars_are_the_loss_curve(tmp_path, tiny_bert, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    out = tmp_path / "tb"
    overrides = [*TINY, "max_steps=5", "batch_size=8"]
    summary = finetune(config(tiny_bert, out, *overrides, report_to="tensorboard"))
    # The events outlive the checkpoints (removed once the model is saved).
    assert not (out / "checkpoints").exists()
    [run] = [p for p in (out / "runs").iterdir() if p.is_dir()]
    assert list(run.glob("events.out.tfevents.*"))
    events = EventAccumulator(str(run), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    scalars = events.Scalars("train/loss")
    rows = curve(out)
    assert [s.step for s in scalars] == [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    # TensorBoard stores float32: equal to the curve's float64 up to that precision.
    assert [s.value for s in scalars] == pytest.approx([r["loss"] for r in rows], rel=1e-6)
    lr = [s.value for s in events.Scalars("train/learning_rate")]
    assert lr == pytest.approx([r["learning_rate"] for r in rows], rel=1e-6)

    def text(tag: str) -> dict:
        [event] = events.Tensors(f"{tag}/text_summary")
        return json.loads(event.tensor_proto.string_val[0].decode())

    recipe, card = text("neobench/recipe"), text("neobench/run_card")
    assert recipe["sha256"] == summary.recipe_sha256 and recipe["max_steps"] == 5
    assert card["config"]["report_to"] == "tensorboard" and card["status"] == "running"
    assert card["recipe"]["sha256"] == summary.recipe_sha256
    saved = yaml.safe_load((out / "neobench_run_card.yaml").read_text())
    assert saved["config"]["report_to"] == "tensorboard"
    assert saved["recipe"]["sha256"] == summary.recipe_sha256  # the tracker is not in the hash
