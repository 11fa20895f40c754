"""`neobench bench`: what the evaluation path costs (encode throughput), measured against stock
sentence-transformers; and `bench gpu`, every claim of the GPU path (training, encoding,
unpadding, scores, top-k) in one run. The host path's benchmarks (a null forward pass, a growing
corpus) are developer scripts in benchmarks/, outside the package.

May import: evaluate, train, encoder, models, protocol, core.
"""
