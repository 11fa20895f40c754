"""Every writer of the reports: the table (table: terminal, Markdown, CSV, LaTeX, PNG; its
FORMATS registry), the forest plot (forest), the terminal (terminal: fitted to the width), and a comparison (compare: terminal, Markdown, CSV,
JSON).

May import: report, protocol, core.
"""
