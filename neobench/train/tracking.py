"""Experiment tracking (`finetune --report-to`): the stock trainer's integrations, given the
recipe and run card as config once their run is open (what goes where: docs/recipe.md,
"Experiment tracking").
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from neobench.train.output import TRACKING

logger = logging.getLogger(__name__)


def prepare(report_to: str) -> None:
    """Before the trainer is built: wandb offline unless the user chose its mode."""
    if report_to == "wandb" and "WANDB_MODE" not in os.environ:
        os.environ["WANDB_MODE"] = "offline"
        logger.warning(
            "wandb logs offline (WANDB_MODE is not set): the run is written under %s; "
            "`wandb sync` uploads it. Set WANDB_MODE=online to log live.",
            os.environ.get("WANDB_DIR", "./wandb"),
        )


def logdir(output: Path) -> Path:
    """Where TensorBoard events of a run in ``output`` go (one folder per start, below it)."""
    given = os.environ.get("TENSORBOARD_LOGGING_DIR")
    return Path(given).expanduser() if given else output / TRACKING


def attach(trainer: Any, report_to: str, output: Path, config: dict[str, Any]) -> None:
    """Give the trainer's ``report_to`` integration the run's ``config`` (and TensorBoard a
    folder that outlives the checkpoints)."""
    if report_to == "none":
        return
    from transformers.integrations.integration_utils import (
        INTEGRATION_TO_CALLBACK,
        default_logdir,
    )

    kind = INTEGRATION_TO_CALLBACK[report_to]
    integration = next(c for c in trainer.callback_handler.callbacks if isinstance(c, kind))
    if report_to == "tensorboard" and integration.logging_dir is None:
        integration.logging_dir = str(logdir(output) / Path(default_logdir()).name)
    trainer.add_callback(RunConfig(report_to, integration, config))


class RunConfig(TrainerCallback):
    """Adds neobench's config to the tracker's run (added after the integration: run open)."""

    def __init__(self, report_to: str, integration: Any, config: dict[str, Any]) -> None:
        self.report_to, self.integration, self.config = report_to, integration, config

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return  # the integrations log from the main process only
        if self.report_to == "tensorboard":
            writer = self.integration.tb_writer
            for key, value in self.config.items():
                writer.add_text(key.replace("_", "/", 1), json.dumps(value, default=str))
            writer.flush()
        else:  # wandb and trackio: the module-level config of the run the integration opened
            import importlib

            tracker = importlib.import_module(self.report_to)
            tracker.config.update(self.config, allow_val_change=True)
