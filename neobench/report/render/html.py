"""The leaderboard page as one self-contained HTML file (`neobench table --html`): the data of
report/page.py as JSON, script and style inline, no fetch allowed (docs/leaderboard-page.md)."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)

# Characters that must not appear raw inside a <script> element's JSON: "</script>" would end it,
# "<!--" would open an HTML comment, and U+2028/U+2029 end lines in older JavaScript parsers.
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
            "\u2029": "\\u2029"}  # fmt: skip


def to_html(data: dict[str, Any]) -> str:
    files = resources.files("neobench.report.render")
    script = files.joinpath("leaderboard.js").read_text(encoding="utf-8")
    style = files.joinpath("leaderboard.css").read_text(encoding="utf-8")
    template = files.joinpath("leaderboard.html").read_text(encoding="utf-8")
    for name, text in (("leaderboard.js", script), ("leaderboard.css", style)):
        if "</script" in text.lower() or "</style" in text.lower():
            raise ValueError(f"{name} holds a closing tag that would end its inline element")
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escaped in _ESCAPES.items():
        body = body.replace(char, escaped)
    title = f"neobench leaderboard: {data['benchmark']}"
    parts = {"TITLE": html.escape(title), "POLICY": POLICY, "STYLE": style, "DATA": body,
             "SCRIPT": script}  # fmt: skip
    # One pass: what is put in is never searched again; no str.format (the script has braces).
    return re.sub(r"@@([A-Z]+)@@", lambda m: parts[m.group(1)], template)
