"""The records every stage shares: errors, run cards, a run read from its results folder, the
stage clock.

Owns: the user-facing error family (errors), the run cards and their fields (cards), a card on disk
(card_io: atomic writes, tolerant reads, orphaned runs), what a card records of its environment
(provenance: versions, git sha, device), one record of an evaluated run and the reader of a
results folder (runs), the per-stage clock (stages).
May import: nothing of neobench outside core. No torch, transformers or mteb at import time.
"""
