"""The package's version, apart from neobench/__init__.py so low layers can read it without
importing the package root (whose lazy names reach the top layer)."""

__version__ = "0.1.0"
