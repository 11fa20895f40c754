"""`neobench bench`: what the evaluation path costs (encode throughput, the host path with a
null forward), measured against stock sentence-transformers and mteb.

May import: evaluate, encoder, models, protocol, core.
"""
