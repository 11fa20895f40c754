"""The records every stage shares: errors; run cards (cards), a card on disk (card_io) and its
environment (provenance); the results folder (results); a run's conditions and the one rule for
which runs may be compared (conditions); one record of a run and the one way to find runs by name
(runs), read by reader, seed replicates merged by replicates; library patches; the stage clock.
May import: nothing of neobench outside core. No torch, transformers or mteb at import time.
"""
