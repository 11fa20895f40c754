"""Texts -> vectors. Owns: the evaluation encoder (encode; feed, tokens, tokenpool: batches
prepared off the main thread), the shared embedding cache (cache), blocked top-k (search).
May import: models, protocol, compat, core.
"""
