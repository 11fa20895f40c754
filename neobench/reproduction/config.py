"""`neobench reproduce`'s config: each field's doc is its flag's help."""

from __future__ import annotations

from dataclasses import dataclass

from neobench.protocol.config import DEFAULT_BENCHMARK, DTYPE_CHOICES, EvalConfig, like, opt
from neobench.reproduction.check import TOLERANCE


@dataclass(kw_only=True)
class ReproduceCommand:
    """`neobench reproduce`: a model against its official MTEB results."""

    model: str = like(EvalConfig, "model")
    as_name: str | None = opt(
        None,
        "the hub id the official results are filed under (default: --model when it is a hub "
        "id, else the folder's own name in its run card or config)",
        flag="--as",
        metavar="HUB_ID",
    )
    official: str = opt(
        help="a clone of github.com/embeddings-benchmark/results (the ResultCache root holding "
        "results/), or 'remote' to download it (a connected machine)",
        metavar="DIR|remote",
    )
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark whose tasks are compared")
    tasks: list[str] | None = opt(
        None,
        "comma-separated tasks (default: every task of the benchmark with an official result)",
        csv=True,
    )
    output: str = opt(
        "reproduce", "folder of the reproduction's eval results and its report (reproduce.json)"
    )
    results: str | None = opt(
        None,
        "results root of the reproduction's eval (default: <output>/reproduced); a finished "
        "`neobench eval` root under the official conditions is reused: the tasks it holds are "
        "read, the rest evaluated into it",
        metavar="DIR",
    )
    tolerance: float = opt(
        TOLERANCE, "largest |reproduced - official| main score (0-1) that matches"
    )
    no_diagnose: bool = opt(False, "compare only: do not re-run each miss once per known cause")
    max_seq_length: int | str | None = opt(
        None,
        "force the max length (tokens, or 'model'; default: the official run's, the model's own)",
    )
    instructions: str | None = opt(
        None,
        "force an instruction profile (default: none, as the official run without instructions)",
    )
    dtype: str | None = opt(
        None, "force the dtype (default: float32, as the official run)", choices=DTYPE_CHOICES
    )
    batch_size: int | None = opt(None, "force the batch size (default: 32, mteb's)")
    normalize: str | None = opt(
        None,
        "force normalisation: model (the folder's own) | on | off",
        choices=("model", "on", "off"),
    )
    data_dir: str | None = like(EvalConfig, "data_dir")
    device: str = like(EvalConfig, "device")
    trust_remote_code: bool = like(EvalConfig, "trust_remote_code")
    json: str | None = opt(None, "also write the report to this JSON file", metavar="FILE")
