"""mteb driven: `neobench eval` (runner and its pieces), the adapter, staging, units/, and the
datasets/mteb shortcuts (fastdata, mtebtexts).

May import: encoder, models, protocol, core. Not train (the stages do not know each other).
"""
