"""Texts -> vectors: tokenisation off the main thread, token-budget batches, the shared
embedding cache and retrieval top-k.

Owns: the evaluation encoder (encode), tokens, the embedding cache (cache), blocked
top-k (search).
May import: models, protocol, core.
"""
