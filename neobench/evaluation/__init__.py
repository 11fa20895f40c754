"""mteb driven: `neobench eval` (runner and its pieces), the adapter, staging, units/; mteb's and
datasets' private names only through neobench/compat.

May import: encoder, models, protocol, compat, core. Not train (the stages do not know each other).
"""
