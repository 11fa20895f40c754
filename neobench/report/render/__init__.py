"""Every writer of the reports: the table (table: Markdown, CSV, LaTeX, PNG and its FORMATS
registry; terminal: the rich table fitted to the width), the forest plot (forest), a
comparison (compare: terminal, Markdown, CSV, JSON), and the leaderboard page (html, with its
leaderboard.html / .js / .css package files: one self-contained HTML file).

May import: report, protocol, core.
"""
