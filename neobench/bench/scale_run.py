"""One size of `neobench bench scale`, in a process of its own (so its peak memory is its own).

The parent (neobench/bench/scale.py) writes the synthetic task's folder and a spec, then runs

    python -m neobench.bench.scale_run SPEC.json

which evaluates the task through run_eval (`neobench eval`'s own path) with the null forward
pass at the spec's width, under the stage clock, and writes its figures to the spec's ``out``.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path
from typing import Any

from neobench.bench.host import HostRun, nullify, timed_null_eval


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """Evaluate the synthetic task as the spec says; its figures (stages, counts, bytes)."""
    from neobench.bench.scale_task import TASK_NAME, registered

    cfg = _eval_config(spec)
    seen: dict[str, Any] = {}

    def hook(loaded: Any) -> None:
        # What the extrapolation needs of the tokenizer: the tokens every text gets besides its
        # own ([CLS] and [SEP] for BERT) and the length texts are cut to.
        seen["special_tokens"] = len(loaded.model.tokenizer("")["input_ids"])
        seen["max_seq_length"] = loaded.max_seq_length
        nullify(loaded, spec["dim"])

    with registered():
        summary, wall, clock = timed_null_eval(cfg, hook, "bench scale")
    run = HostRun(
        cache="off" if spec["no_cache"] else "on",
        wall=wall,
        tokens=summary.tokens_encoded,
        texts_requested=summary.texts_requested,
        texts_encoded=summary.texts_encoded,
        seconds=dict(clock.seconds),
        cpu=dict(clock.cpu_seconds),
        busy=dict(clock.busy_seconds),
    )
    outcome = summary.outcomes[0]
    result = next(Path(spec["results"]).rglob(f"{TASK_NAME}.json"))
    return {
        **run.summary(),
        **seen,
        "main_score": outcome.main_score,
        "result_bytes": result.stat().st_size,
        "units_bytes": outcome.units_bytes or 0,
        "vm_hwm_bytes": _vm_hwm(),
        # Linux reports ru_maxrss in KiB.
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _eval_config(spec: dict[str, Any]) -> Any:
    """`neobench eval`'s config for the synthetic task in the spec's folders."""
    from neobench.bench.scale_task import BENCHMARK_NAME, TASK_NAME
    from neobench.protocol.config import EvalConfig

    return EvalConfig(
        model=spec["model"],
        benchmark=BENCHMARK_NAME,
        tasks=[TASK_NAME],
        data_dir=spec["mirror"],
        results=spec["results"],
        cache_dir=spec["cache_dir"],
        no_cache=spec["no_cache"],
        # "all": what the cache costs per stored text at this size. The synthetic task has no
        # mteb statistics, so eval's default policy would store none of it; what the default
        # stores of a real run is benchmarks/cache_estimate.py's figure.
        cache_policy="all",
        device=spec["device"],
        max_seq_length=spec["max_seq_length"],
        token_budget=spec["token_budget"],
    )


def _vm_hwm() -> int | None:
    """The kernel's peak resident set of this process (VmHWM), or None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def main(argv: list[str]) -> int:
    from neobench.core.errors import NeobenchError

    spec = json.loads(Path(argv[0]).read_text())
    try:
        figures = run_one(spec)
    except NeobenchError as error:  # the parent shows the log's last lines: make them the reason
        print("\n".join(f"error: {p}" for p in error.problems), file=sys.stderr)
        return error.exit_code
    Path(spec["out"]).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
