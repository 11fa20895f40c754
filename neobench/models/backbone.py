"""What neobench checks in a model folder before loading it (a safetensors file cut short), and
settles in its tokenizer after (right padding, a pad token): docs/guide.md, "Backbones".
"""

from __future__ import annotations

import json
from pathlib import Path

from neobench.core.errors import NeobenchError


def check_weights(folders: list[Path], spec: str) -> None:
    """Refuse a cut-off ``*.safetensors`` file (an interrupted download) before loading: its
    header says how many bytes it holds, so a short file is found without reading the tensors."""
    problems = []
    for file in sorted({f for folder in folders for f in folder.glob("*.safetensors")}):
        problem = _safetensors_problem(file)
        if problem:
            problems.append(
                f"--model {spec}: weights file {file.name} {problem} (in {file.parent}). The "
                "download or copy was interrupted: download the model again (`hf download REPO "
                "--local-dir DIR`, or delete the folder or its hub cache entry and fetch it anew)."
            )
    if problems:
        raise NeobenchError(problems)


def safetensors_tensors(file: Path) -> dict[str, dict]:
    """The tensors a safetensors file's header describes (name -> dtype, shape, data_offsets),
    read without the weights (the layout: _safetensors_problem)."""
    with file.open("rb") as handle:
        header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
    return {k: v for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}


def _safetensors_problem(file: Path) -> str | None:
    """Why ``file`` is not a complete safetensors file, or None. Layout: 8 bytes little-endian
    header length n, n bytes of JSON mapping each tensor to ``data_offsets`` [begin, end) in the
    byte buffer that follows."""
    size = file.stat().st_size
    with file.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return f"is {size} bytes long, shorter than a safetensors header"
        length = int.from_bytes(head, "little")
        if 8 + length > size:
            return f"is truncated: {size} bytes, but its header alone needs {8 + length}"
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return "has an unreadable header (not a safetensors file, or damaged)"
    ends = [
        entry["data_offsets"][1]
        for key, entry in header.items()
        if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry
    ]
    expected = 8 + length + max(ends, default=0)
    if size < expected:
        return f"is truncated: {size} bytes of the {expected} its header describes"
    return None


def settle_tokenizer(model: object, config: dict, spec: str) -> dict[str, object]:
    """Right padding (absolute positions count from the first column) and a pad token (the
    config's pad_token_id, else eos, sep or unk: padding is masked out), whatever the folder
    said; returns the record."""
    tokenizer = model[0].tokenizer
    if tokenizer is None:
        raise NeobenchError(f"--model {spec}: it has no text tokenizer; neobench embeds text.")
    adjusted = []
    if tokenizer.padding_side != "right":
        adjusted.append(f"padding_side {tokenizer.padding_side!r} -> 'right'")
        tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        source, token = _pad_token(tokenizer, config)
        if token is None:
            raise NeobenchError(
                f"--model {spec}: its tokenizer has no pad token, and no eos, sep or unk token "
                "to pad with. Add one to the tokenizer (tokenizer.add_special_tokens("
                "{'pad_token': '[PAD]'}), then save_pretrained) and pass that folder."
            )
        tokenizer.pad_token = token
        adjusted.append(f"pad_token set to {token!r} (from {source})")
    return {
        "class": type(tokenizer).__name__,
        "padding_side": tokenizer.padding_side,
        "pad_token": str(tokenizer.pad_token),
        "adjusted": adjusted,
    }


def _pad_token(tokenizer: object, config: dict) -> tuple[str, str | None]:
    pad_id = config.get("pad_token_id")
    if isinstance(pad_id, int) and 0 <= pad_id < len(tokenizer):
        return "the config's pad_token_id", tokenizer.convert_ids_to_tokens(pad_id)
    for name in ("eos_token", "sep_token", "unk_token"):
        token = getattr(tokenizer, name, None)
        if token is not None:
            return name, str(token)
    return "", None
