"""The boundary with the libraries: every use of a private name of mteb, datasets, transformers
or sentence-transformers, and every library patch, lives here, one module per library
(mteb.py, datasets.py, transformers.py) and the patch registry with its gate (patches.py).
Everything else calls these functions; tests/test_boundary.py fails on a private name used
outside (docs/architecture.md, "The boundary with the libraries").

May import: core. Libraries are imported inside the functions that need them, except where a
patch must keep the library's own function from before it is set.
"""
