"""What `neobench eval` costs as a retrieval corpus grows, and what a whole run would cost.

Writes synthetic retrieval tasks of real text (documents recombined from the mirror's retrieval
corpora, real queries, seeded relevance) at each corpus size, evaluates each through
`neobench eval`'s own path with a null forward pass of BERT-base width (768) and MiniLM's
tokenizer, each size in its own process, and prints seconds by stage, tokens/s, peak memory and
bytes on disk per size, the scaling exponent of each, and the extrapolation to one model's run of
MTEB(eng, v1) from mteb's task statistics. Everything temporary is removed afterwards.

    python benchmarks/scale_rehearsal.py --data-dir ../shared/data/hub --json scale.json
    python benchmarks/scale_rehearsal.py --data-dir DIR --sizes 50k,100k,200k --cache off
    python benchmarks/scale_rehearsal.py --data-dir DIR --work-dir /scratch/me --device cuda

The default sizes (0.25, 0.5, 1 and 2 million documents) need about 5 KB of disk per document of
the largest size at --dim 768 (embedding cache, parquet, datasets' arrow copy). Any flag of
`neobench bench scale` is accepted (see `neobench bench scale --help`).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from neobench.cli.main import main

if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
    sys.exit(main(["bench", "scale", *sys.argv[1:]]))
