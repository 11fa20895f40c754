"""`neobench bench encode` and `bench gpu`: throughput and cost measurements."""

from __future__ import annotations

from pathlib import Path

from neobench.bench.config import BenchEncodeCommand, BenchGpuCommand
from neobench.cli.output import out, say


def cmd_bench(cfg: BenchEncodeCommand) -> int:
    """encoding tokens/s of neobench's encoder vs stock encode"""
    from neobench.bench import encode as bench

    out.print(bench.encode_report(cfg), highlight=False, markup=False, soft_wrap=True)
    return 0


def cmd_bench_gpu(cfg: BenchGpuCommand) -> int:
    """everything the GPU path claims (training, encoding, unpadding, scores, top-k) in one run"""
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
