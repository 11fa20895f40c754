"""Every writer of the reports: the table (table: Markdown, CSV, LaTeX, PNG and its FORMATS
registry; terminal: the rich table fitted to the width), the forest plot (forest), and a
comparison (compare: terminal, Markdown, CSV, JSON).

May import: report, protocol, core.
"""
