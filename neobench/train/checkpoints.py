"""Checkpoints written whole: --resume only chooses a complete one (docs/guide.md, "neobench
finetune"). `Marker` (on_save) writes MARKER, every file with its size, atomically; a checkpoint
without one (older runs) is whole when trainer_state.json (written last) parses and its weights
are there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neobench.core.card_io import write_text_atomic

MARKER = "neobench_checkpoint.json"
STATE = "trainer_state.json"
WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def files(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` but the marker, relative path -> size in bytes."""
    found = (p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MARKER)
    return {str(p.relative_to(folder)): p.stat().st_size for p in found}


def problem(folder: Path) -> str | None:
    """Why ``folder`` is not a whole checkpoint, or None when it is."""
    marker = folder / MARKER
    if marker.is_file():
        try:
            listed = json.loads(marker.read_text())["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return f"{MARKER} is damaged"
        present = files(folder)
        differ = sorted(n for n, size in listed.items() if present.get(n) != size)
        return f"{', '.join(differ[:3])} missing or cut short" if differ else None
    try:
        json.loads((folder / STATE).read_text())
    except (OSError, ValueError):
        return f"no complete {STATE}: it was being written when the run stopped"
    if not any(any(folder.rglob(name)) for name in WEIGHTS):
        return "no model weights"
    return None


def marker() -> Any:
    """A trainer callback that marks each checkpoint whole once the trainer has written all of
    it (main process). Built on demand: transformers is imported only by a fine-tune."""
    from transformers import TrainerCallback

    class Marker(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if folder.is_dir():
                    body = {"step": state.global_step, "files": files(folder)}
                    write_text_atomic(folder / MARKER, json.dumps(body, indent=1) + "\n")

    return Marker()
