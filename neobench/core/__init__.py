"""The records every stage shares: errors, run cards, the results folder, a run's conditions,
Run (read by reader, replicates merged), the stage hook (docs/architecture.md).
May import: nothing of neobench outside core. No torch, transformers or mteb at import time.
"""
