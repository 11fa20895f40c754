"""Every writer of the reports: the table (table, with its FORMATS; terminal), the forest plot
(forest), a comparison (compare) and the leaderboard page (html, with leaderboard.html/.js/.css).
May import: report, protocol, core.
"""
