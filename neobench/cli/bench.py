"""`neobench bench gpu`: every claim of the GPU path, measured in one run."""

from __future__ import annotations

from pathlib import Path

from neobench.bench.config import BenchGpuCommand
from neobench.cli.output import out, say
from neobench.protocol.tasks import build_registry


def cmd_bench_gpu(cfg: BenchGpuCommand) -> int:
    """everything the GPU path claims (training, encoding, unpadding, scores, top-k) in one run"""
    build_registry()  # before torch (protocol/tasks.py says why)
    from neobench.bench import gpu, gpu_report
    from neobench.core.card_io import write_text_atomic

    record = gpu.run_gpu_bench(cfg)
    table = gpu_report.markdown(record)
    out.print(table, highlight=False, markup=False, soft_wrap=True)
    for path, text in ((cfg.json, gpu_report.to_json(record)), (cfg.markdown, table)):
        if path:
            write_text_atomic(Path(path), text)
            say(f"wrote {path}", markup=False)
    failed = gpu.failed(record)
    if failed:
        say(f"[bold red]bench gpu:[/] {', '.join(failed)} did not pass (see the table)")
    return 1 if failed else 0
