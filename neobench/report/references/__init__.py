"""Published rows quoted in tables (the NeoBERT paper's Table 4), as data."""
