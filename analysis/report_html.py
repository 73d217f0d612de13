"""report.md as one self-contained HTML page: its tables, verdicts and figures (embedded), readable in
any browser and inside ``snakemake --report``, which shows it in a frame. Also the escaping that keeps a
name (a run's label, an edge file's, a folder's) text in Markdown and in reST: names never become markup."""
from __future__ import annotations

import base64
import html
import re
import string
import math
import sys
from pathlib import Path
from urllib.parse import unquote
from analysis.files import read_regular

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1.5em; color: #1a1a1a; line-height: 1.45; }
h1 { border-bottom: 2px solid #0173b2; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .15em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d0d0; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f2f5f8; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: none; height: auto; border: 1px solid #eee; }
p:has(> img) { overflow-x: auto; }  /* a figure wider than the page scrolls at its own size, never shrunk */
code { background: #f4f4f4; padding: 0 .25em; border-radius: 3px; }
.verdict-holds { color: #0b6e2e; font-weight: 600; }
.verdict-fails { color: #b00020; font-weight: 600; }
.verdict-inconclusive { color: #8a5a00; font-weight: 600; }
.verdict-incomplete { color: #666; font-style: italic; }
"""


# -- names as text ---------------------------------------------------------------------------------
_MARKDOWN_ACTIVE = re.compile(r"([\\`*_\[\]|])")


def md_text(value) -> str:
    """``value`` as literal Markdown text, safe in a table cell too: one line, ``&`` and ``<`` as
    entities (no HTML in any renderer) and Markdown's own characters (links, emphasis, code, ``|``)
    backslash-escaped."""
    text = " ".join(str(value).split()).replace("&", "&amp;").replace("<", "&lt;")
    return _MARKDOWN_ACTIVE.sub(r"\\\1", text)


def names_as_text(frame, columns):
    """``frame`` with each of ``columns`` (names: methods, topologies, cells) as md_text, for to_markdown."""
    return frame.assign(**{c: [md_text(v) for v in frame[c]] for c in columns if c in frame})


def md_code(value) -> str:
    """``value`` as one Markdown code span, whatever backticks it holds."""
    text = " ".join(str(value).split())
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def rst_text(value) -> str:
    """``value`` as literal reStructuredText: one paragraph with every punctuation character
    backslash-escaped, so no directive (``.. raw::``, ``.. include::``), link or role can start."""
    return "".join("\\" + c if c in string.punctuation else c for c in " ".join(str(value).split()))


def report_caption(fig_dir, figure: str) -> str:
    """The caption of ``figure`` in ``fig_dir/index.json`` as one paragraph of literal reST, for
    ``snakemake --report`` (a placeholder before it is drawn, and the reason when the index is damaged)."""
    from analysis.errors import UsageError
    from analysis.figures.index import read_index  # here: the figures' catalog is not the report page's

    try:
        caption = read_index(Path(fig_dir)).get(figure, f"{figure}: not drawn yet")
    except UsageError as err:
        caption = f"{figure}: no caption ({err})"
    return rst_text(caption)


# -- pictures: only the results folder's own ---------------------------------------------------------
def inside(base: Path, target) -> Path | None:
    """``base / target`` with every link followed, if it lies inside ``base`` (also resolved); else None."""
    try:
        root = Path(base).resolve()
        path = (Path(base) / target).resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a loop of links
        return None
    return path if path.is_relative_to(root) else None


def warn(message: str) -> None:
    """One line on stderr: what the report left out and why."""
    print(f"warning: {' '.join(message.split())}", file=sys.stderr)


_PICTURE = re.compile(r"!\[((?:\\.|[^\]\\])*)\]\(([^)\s]*)\)")


def _embed_images(text: str, base: Path) -> str:
    """``![alt](figures/x.png)`` -> the PNG inlined as a data URI (the page needs no other file). A picture
    elsewhere (outside ``base``, links followed, or on the web) is refused: a note in its place and a
    warning on stderr."""
    def inline(match: re.Match) -> str:
        alt, target = match.group(1), unquote(match.group(2))
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|//", target):
            warn(f"report.html: picture {target!r} not inlined: only files inside {base} are")
            return f"*(picture {md_code(target)} not inlined: only files of the results folder are)*"
        path = inside(base, target)
        if path is None:
            warn(f"report.html: picture {target!r} not inlined: it lies outside {base}")
            return f"*(picture {md_code(target)} refused: it lies outside the results folder)*"
        if not path.is_file() or path.suffix.lower() != ".png":
            return f"*(picture {md_code(target)} not found)*"
        data = base64.b64encode(read_regular(path)).decode("ascii")
        return f"![{alt}](data:image/png;base64,{data})"

    return _PICTURE.sub(inline, text)


def _safe_url(url: str, picture: bool) -> bool:
    """A picture only as a PNG inlined here; a link to the web, a mail address or a file next to the report."""
    from markdown.util import AMP_SUBSTITUTE

    url = url.replace(AMP_SUBSTITUTE, "&")
    if "\x02" in url or "\x03" in url:  # a placeholder Markdown fills in later: not a plain address
        return False
    plain = re.sub(r"[\x00-\x20\x7f]+", "", html.unescape(url))  # what a browser reads: entities decoded
    if picture:
        return plain.startswith("data:image/png;base64,")
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", plain)
    return scheme is None or scheme.group(1).lower() in ("http", "https", "mailto")


def _safe_urls_processor(md):
    from markdown.treeprocessors import Treeprocessor

    class SafeUrls(Treeprocessor):
        """Drops an address that could run code or fetch something (javascript:, a remote picture)."""

        def run(self, root):
            for element in root.iter():
                for attribute in ("href", "src"):
                    url = element.get(attribute)
                    if url is not None and not _safe_url(url, picture=attribute == "src"):
                        del element.attrib[attribute]
                if element.tag == "img" and element.get("src"):
                    width = _shown_width(element.get("src"))
                    if width:
                        element.set("width", str(width))

    return SafeUrls(md)


def _shown_width(src: str) -> int | None:
    """CSS pixels of an inlined PNG at the size it was drawn for: its pixels at 96 per inch of its recorded
    resolution (a 150-dpi figure of 16 inches: 1536 px), so its text reads as drawn instead of shrinking to
    the page's width; None when the PNG records no resolution."""
    import struct

    try:
        data = base64.b64decode(src.split(",", 1)[1])
    except (IndexError, ValueError):
        return None
    at = 8  # after the signature: chunks of length, type, data, CRC, up to the image data
    while at + 8 <= len(data) and data[at + 4:at + 8] != b"IDAT":
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"pHYs" and length == 9 and data[at + 16] == 1:  # unit 1: pixels per metre
            per_metre = struct.unpack(">I", data[at + 8:at + 12])[0]
            width = struct.unpack(">I", data[16:20])[0]
            return round(width * 96 / (per_metre * 0.0254)) if per_metre else None
        at += 12 + length
    return None


def report_categories(questions: dict[str, str], figures: list[str], first: str) -> dict[str, str]:
    """`snakemake --report`'s group of each of a study's ``figures``, numbered 2, 3, ... after ``first`` ("1. ...")
    in the order of the questions' own numbers: a study drawing questions 2, 3 and 5 shows 2, 3, 4, not gaps."""
    def number(question: str) -> float:
        head = question.split(".", 1)[0]
        return float(head) if head.strip().isdigit() else math.inf

    asked = sorted({questions[f] for f in figures if f in questions}, key=lambda q: (number(q), q))
    named = {q: f"{i}. {q.split('. ', 1)[-1]}" for i, q in enumerate(asked, start=int(first.split(".")[0]) + 1)}
    return {f: named[questions[f]] for f in figures if f in questions}


VERDICT_CLASS = {"holds": "holds", "does not hold": "fails", "undecided": "inconclusive",
                 "not tested here": "incomplete", "fails": "fails", "inconclusive": "inconclusive",
                 "incomplete": "incomplete"}


def _mark_verdicts(page: str) -> str:
    """A claim's verdict cell coloured by its outcome: decided (holds, does not hold) or not (undecided, not
    tested here)."""
    words = "|".join(VERDICT_CLASS)
    return re.sub(rf"<td([^>]*)>(?:<strong>)?({words})(?:</strong>)?</td>",
                  lambda m: f'<td{m.group(1)} class="verdict-{VERDICT_CLASS[m.group(2)]}">{m.group(2)}</td>', page)


def markdown_to_html(text: str) -> str:
    """Markdown as HTML with raw HTML off (a tag in the text is shown, not run) and safe addresses only."""
    import markdown

    md = markdown.Markdown(extensions=["tables", "fenced_code"])
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    md.treeprocessors.register(_safe_urls_processor(md), "safe_urls", -1)  # after every other one
    return md.convert(text)


def render(markdown_text: str, base: Path, title: str) -> str:
    """The page for ``markdown_text`` (report.md), figures under ``base`` embedded."""
    body = markdown_to_html(_embed_images(markdown_text, Path(base)))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n{_mark_verdicts(body)}\n</body></html>\n")
