"""The records every stage shares: errors, run cards, one record of a run and its conditions,
the results folder, the stage clock.

Owns: the user-facing error family (errors); the run cards and their fields (cards), a card on
disk (card_io: atomic writes, tolerant reads, orphaned runs), what a card records of its
environment (provenance: versions, git sha, device); the results folder's layout (layout); the
conditions of a run and the one rule for which runs may be compared (conditions); one record of
an evaluated run, single or seed replicates, and the one way to find runs by name (runs); the
reader of results folders (reader) and the merging of seed replicates (replicates); the
per-stage clock (stages).
May import: nothing of neobench outside core. No torch, transformers or mteb at import time.
"""
