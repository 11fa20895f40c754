"""`neobench bench gpu`: every claim of the GPU path (training, encoding, unpadding, scores,
top-k) in one run, and the measuring tools it shares with the developer benchmarks in
benchmarks/ (outside the package).

May import: evaluate, train, encoder, models, protocol, core.
"""
