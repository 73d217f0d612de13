"""report.md as one self-contained HTML page: its tables, verdicts and figures (embedded), readable in
any browser and inside ``snakemake --report``, which shows it in a frame."""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1.5em; color: #1a1a1a; line-height: 1.45; }
h1 { border-bottom: 2px solid #0173b2; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .15em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d0d0; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f2f5f8; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
code { background: #f4f4f4; padding: 0 .25em; border-radius: 3px; }
.verdict-holds { color: #0b6e2e; font-weight: 600; }
.verdict-fails { color: #b00020; font-weight: 600; }
.verdict-inconclusive { color: #8a5a00; font-weight: 600; }
.verdict-incomplete { color: #666; font-style: italic; }
"""


def _embed_images(text: str, base: Path) -> str:
    """``![alt](figures/x.png)`` -> the PNG inlined as a data URI (the page needs no other file)."""
    def inline(match: re.Match) -> str:
        alt, target = match.group(1), match.group(2)
        path = base / target
        if target.startswith(("http:", "https:", "data:")) or not path.is_file() or path.suffix != ".png":
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"![{alt}](data:image/png;base64,{data})"

    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", inline, text)


def _mark_verdicts(page: str) -> str:
    """A claim's verdict cell coloured by its outcome: decided (holds, fails) or not (inconclusive, incomplete)."""
    return re.sub(r"<td([^>]*)>(?:<strong>)?(holds|fails|inconclusive|incomplete)(?:</strong>)?</td>",
                  lambda m: f'<td{m.group(1)} class="verdict-{m.group(2)}">{m.group(2)}</td>', page)


def render(markdown_text: str, base: Path, title: str) -> str:
    """The page for ``markdown_text`` (report.md), figures under ``base`` embedded."""
    import markdown

    body = markdown.markdown(_embed_images(markdown_text, Path(base)), extensions=["tables", "fenced_code"])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n{_mark_verdicts(body)}\n</body></html>\n")
