"""The host's share of an evaluation: `neobench eval`'s path with a forward pass that costs nothing.

Runs SciFact, ArguAna, TwentyNewsgroupsClustering, STSBenchmark and Banking77Classification (the
default) through neobench's evaluation with the embedding cache off, cold and warm, then through
stock `mteb.evaluate` + `SentenceTransformer.encode` with the same null forward pass and prompts,
all in one process after one untimed start-up (imports, mteb's benchmark registry). Prints seconds
and tokens/s per stage, the end-to-end ratio against stock, and what one core's tokenisation feeds
of an H100's forward ceiling.

    python benchmarks/host_pipeline.py --data-dir ../shared/data/hub
    python benchmarks/host_pipeline.py --data-dir ../shared/data/hub --json host.json
    python benchmarks/host_pipeline.py --data-dir DIR --tasks SciFact --cache off --device cuda

Any flag of `neobench bench host` is accepted (see `neobench bench host --help`).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from neobench.cli.main import main

if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
    sys.exit(main(["bench", "host", "--stock", *sys.argv[1:]]))
