"""`neobench bench gpu`: every claim of the GPU path in one run, and the measuring tools it
shares with benchmarks/ (outside the package).
May import: evaluate, train, encoder, models, protocol, compat, core.
"""
