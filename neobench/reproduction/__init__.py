"""`neobench reproduce`: a model against its official MTEB results, and the cause of every miss."""
