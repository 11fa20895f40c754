"""`neobench bench`: what the evaluation path costs (encode throughput, the host path with a
null forward), measured against stock sentence-transformers and mteb; and `bench gpu`, every
claim of the GPU path (training, encoding, unpadding, scores, top-k) in one run.

May import: evaluate, train, encoder, models, protocol, core.
"""
