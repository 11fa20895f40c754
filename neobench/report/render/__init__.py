"""Writers of tables: terminal, Markdown, CSV, LaTeX, PNG and the forest plot.

May import: report, protocol, core.
"""
