"""No markup from names: a results folder, a run's label and an edge file's name that hold HTML, Markdown
and reST reach the reports as text. The study's report.html is opened in headless Chromium and its DOM
read back: no element, attribute or address the names made. A picture outside the results folder is
refused, not inlined."""
import base64
import contextlib
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis import cli as analysis_cli
from analysis_fixtures import make_run
from test_pipeline import ROOT
from test_report_browser import headless, needs_browser

pytestmark = pytest.mark.slow

PWN = "document.title='PWNED'"
FOLDER = f"study <img src=x onerror={PWN}> [a](javascript:{PWN}) |x| *y*"  # no "/": one folder
LABEL = f"<script>{PWN}</script> a|b [c](javascript:{PWN})"  # run.json's "algorithm": {"label": ...}
OTHER_LABEL = f"<img src=x onerror={PWN}> `q` ](javascript:{PWN})"
EDGES = f"file:/data/<script>{PWN}</script><svg onload={PWN}>|e.txt"  # an edge-list topology


class Dom(HTMLParser):
    """Every element (tag, attributes) of a page, and the text of each one."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.elements, self.open = [], []
        self.feed(page)
        assert self.elements, "the browser gave no page"

    def handle_starttag(self, tag, attrs):
        element = SimpleNamespace(tag=tag, attrs=dict(attrs), text="")
        self.elements.append(element)
        if tag not in ("img", "meta", "br", "hr", "input", "link"):
            self.open.append(element)

    def handle_endtag(self, tag):
        while self.open and self.open.pop().tag != tag:
            pass

    def handle_data(self, data):
        for element in self.open:
            element.text += data

    def texts(self, tag: str) -> list[str]:
        return [" ".join(e.text.split()) for e in self.elements if e.tag == tag]


def browse(folder: Path, body: str) -> Dom:
    """The DOM of a page holding ``body``, as the browser built it."""
    page = folder / "page.html"
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title></head><body>{body}</body></html>")
    return Dom(headless("--dump-dom", page.as_uri()).stdout)


def analysis(*args: str) -> tuple[int, str]:
    """``python -m analysis ARGS`` in this process: its exit status and what it said on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = analysis_cli.main(list(args))
    return status, err.getvalue()


def _label(run: Path, label: str) -> None:
    record = json.loads((run / "run.json").read_text())
    record["algorithm"]["label"] = label
    (run / "run.json").write_text(json.dumps(record))


def assert_no_markup_from_names(dom: Dom) -> None:
    assert not [e for e in dom.elements if e.tag in ("script", "svg", "iframe", "object", "embed")]
    assert not [(e.tag, k) for e in dom.elements for k in e.attrs if k.startswith("on")]
    assert all(e.attrs.get("src", "data:image/png;base64,").startswith("data:image/png;base64,")
               for e in dom.elements if e.tag == "img")
    links = ["".join(e.attrs["href"].split()).lower() for e in dom.elements if e.tag == "a" and "href" in e.attrs]
    assert not [h for h in links if "javascript" in h or "pwned" in h]
    assert dom.texts("title")[0] != "PWNED"  # nothing the names held ran


@pytest.fixture(scope="module")
def hostile_study(tmp_path_factory):
    study = tmp_path_factory.mktemp("markup") / FOLDER
    for seed in range(2):
        make_run(study / "runs" / f"ar{seed}", algorithm="allreduce", compressor="none", topology=EDGES, seed=seed)
        _label(make_run(study / "runs" / f"choco{seed}", topology=EDGES, seed=seed), LABEL)
        _label(make_run(study / "runs" / f"dcd{seed}", algorithm="dcd", topology=EDGES, seed=seed), OTHER_LABEL)
    for command in (["figures", str(study), "--only", "accuracy_curves"], ["report", str(study)]):
        status, err = analysis(*command)
        assert status == 0, err
    return study


def test_the_names_reach_report_md_as_escaped_text(hostile_study):
    md = (hostile_study / "report.md").read_text()
    assert "<script" not in md and "<img" not in md and "<svg" not in md
    assert not re.search(r"(?<!\\)\]\(javascript", md)  # every "]" of a name is escaped: no link starts
    assert md.startswith("# study &lt;img src=x onerror=")
    caption = json.loads((hostile_study / "figures" / "index.json").read_text())["accuracy_curves"]
    assert "<svg" in caption  # the edge file's name is in the figure's caption, and it too is text in the report


@needs_browser
def test_report_html_in_a_browser_shows_the_names_as_text(hostile_study):
    page = hostile_study / "report.html"
    dom = Dom(headless("--dump-dom", page.as_uri()).stdout)
    assert_no_markup_from_names(dom)
    assert dom.texts("h1")[0].startswith(FOLDER + ":")
    cells = dom.texts("th") + dom.texts("td")
    # a name with "|" is one cell, not two: Table 1's columns, the per-cell table's method and topology
    assert LABEL in cells and OTHER_LABEL in cells
    assert f"{LABEL} (sign)" in cells
    assert any(cell.startswith(EDGES) for cell in cells)
    paragraphs = " ".join(dom.texts("p"))
    assert EDGES in paragraphs  # "what was run" and the figure's caption
    assert sum(e.tag == "img" for e in dom.elements) == 1  # the figure, inlined


@needs_browser
def test_hostile_markdown_in_a_section_renders_as_text_with_no_live_address(tmp_path):
    """Any section (one that forgot to escape a name included): raw HTML is shown, unsafe addresses dropped."""
    from analysis.report_html import markdown_to_html

    text = (f"<script>{PWN}</script>\n\n<div onclick=\"{PWN}\">x</div>\n\n"
            f"[a](javascript:{PWN}) [b](JaVa&#115;cript:{PWN}) [c](java\tscript:x) [d](<java script:x>)\n\n"
            f"![e](javascript:{PWN}) ![f](http://example.com/x.png) [g](https://example.com) [h](table1.tex)\n\n"
            f"[r]: data:text/html,{PWN}\n\n[r] <a@b.c>")
    dom = browse(tmp_path, markdown_to_html(text))
    assert_no_markup_from_names(dom)
    hrefs = [e.attrs.get("href") for e in dom.elements if e.tag == "a"]
    assert "https://example.com" in hrefs and "table1.tex" in hrefs  # ordinary links stay
    pictures = [e.attrs for e in dom.elements if e.tag == "img"]
    assert [p["alt"] for p in pictures] == ["e", "f"] and not [p for p in pictures if "src" in p]  # no address left
    assert not [h for h in hrefs if h and h.startswith("data:")]
    assert f"<script>{PWN}</script>" in " ".join(dom.texts("p"))


@pytest.fixture()
def study_with_outside_pictures(tmp_path):
    """figures/index.json naming pictures outside the folder: a link to one, and captions that name
    one by an absolute and by a relative path; and one picture that is the folder's own."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.png"
    secret.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not for the report " * 40)
    study = tmp_path / "study"
    make_run(study / "runs" / "ar", algorithm="allreduce", compressor="none")
    make_run(study / "runs" / "choco")
    figures = study / "figures"
    figures.mkdir()
    own = b"\x89PNG\r\n\x1a\n" + b"the folder's own figure " * 40
    (figures / "own.png").write_bytes(own)
    (figures / "linked.png").symlink_to(secret)
    index = {"linked": "A link out of the folder.",
             "own": f"Its caption names two pictures: ![a]({secret}) and ![b](../outside/secret.png)."}
    (figures / "index.json").write_text(json.dumps(index))
    return study, base64.b64encode(secret.read_bytes()).decode(), base64.b64encode(own).decode()


@needs_browser
def test_a_picture_outside_the_results_folder_is_refused_not_inlined(study_with_outside_pictures):
    study, secret, own = study_with_outside_pictures
    status, err = analysis("report", str(study))
    assert status == 0, err
    page = (study / "report.html").read_text()
    # the folder's own figure is inlined; the outside one is not, nor its caption
    assert secret not in page and own in page and "A link out of the folder" not in page
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 3 and "'linked'" in warnings[0] and "outside" in err and "Traceback" not in err
    dom = Dom(headless("--dump-dom", (study / "report.html").as_uri()).stdout)
    shown = " ".join(dom.texts("p") + dom.texts("em"))
    assert "figure linked refused: figures/linked.png lies outside the results folder" in shown
    assert f"picture {study.parent / 'outside' / 'secret.png'} refused" in shown
    assert "picture ../outside/secret.png refused" in shown
    assert [e.attrs["src"][:22] for e in dom.elements if e.tag == "img"] == ["data:image/png;base64,"]


def _snakemake_caption(caption: str) -> str:
    """figure.rst as `snakemake --report` renders it (snakemake/report/__init__.py): Jinja, then docutils."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    template = (ROOT / "workflow" / "report" / "figure.rst").read_text()
    rst = Environment(trim_blocks=True, lstrip_blocks=True).from_string(template).render(
        snakemake=SimpleNamespace(params=SimpleNamespace(caption=caption)))
    return publish_parts(rst, writer="html")["body"]


HOSTILE_CAPTION = (f"Accuracy on a ring from file:{EDGES} `x <javascript:{PWN}>`_ |sub| *y* name_\n\n"
                   f".. raw:: html\n\n   <img src=x onerror={PWN}>\n\n.. include:: /etc/passwd\n\nend::")


@needs_browser
def test_snakemake_figure_captions_are_text_in_a_browser(tmp_path):
    from analysis.report_html import rst_text

    body = _snakemake_caption(rst_text(HOSTILE_CAPTION))
    assert "root:" not in body  # no file was included
    dom = browse(tmp_path, body)
    assert_no_markup_from_names(dom)
    assert not [e for e in dom.elements if e.tag in ("img", "a", "em")]
    assert " ".join(dom.texts("p")) == " ".join(HOSTILE_CAPTION.split())  # every character, as text


def test_the_figure_rule_hands_snakemake_the_escaped_caption(tmp_path):
    from analysis.report_html import report_caption

    raw = _snakemake_caption(HOSTILE_CAPTION)  # the harness can fail: unescaped, the caption is markup
    assert "<img src=x onerror" in raw and 'href="javascript:' in raw and "root:" in raw
    common = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    assert "return report_caption(Path(png).parent, figure)" in common  # figure.rst's caption param
    (tmp_path / "index.json").write_text(json.dumps({"x": HOSTILE_CAPTION}))
    rst = report_caption(tmp_path, "x")
    assert "\n" not in rst and ".. raw" not in rst and _snakemake_caption(rst).count("<p>") == 1
    assert "not drawn yet" in report_caption(tmp_path, "y")
    (tmp_path / "index.json").write_text('{"x": ')  # damaged: the report says so instead of stopping
    assert "damaged" in report_caption(tmp_path, "x")


def test_other_sections_keep_a_hostile_name_as_text_groups_number_without_gaps_wide_figures_keep_size(tmp_path):
    import pandas as pd
    from PIL import Image

    from analysis.report_html import markdown_to_html, names_as_text, render, report_categories

    frame = pd.DataFrame({"method": ["a|b<script>x()</script>"], "topology": ["ring"], "gap": [1.5]})
    table = names_as_text(frame, ["method", "topology", "absent"]).to_markdown(index=False)
    row = table.splitlines()[2]
    assert len(re.findall(r"(?<!\\)\|", row)) == 4  # three cells: the name's own | is escaped
    assert "<script>" not in table
    page = markdown_to_html(table)
    assert "<script>" not in page and page.count("<td") == 3 and "a|b&lt;script&gt;" in page
    assert report_categories({"a": "2. A?", "b": "5. B?"}, ["b", "a"], "1. T") == {"a": "2. A?", "b": "3. B?"}
    Image.new("RGB", (3000, 100)).save(tmp_path / "wide.png", dpi=(150, 150))  # 20 inches: 1920 px, scrolled
    assert 'width="1920"' in render("![wide](wide.png)", tmp_path, "t")  # not shrunk until its text is tiny
