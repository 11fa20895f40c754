"""`neobench glue`: the paper's GLUE protocol, one run per task x grid point x seed, with the stock
transformers Trainer (run.py).

May import: models, protocol, compat, core.
"""
