"""rag_core.service.render: untrusted text becomes inert Markdown; quotes are highlighted; PDF pages are drawn with the
passage marked. Markdown is checked by rendering it with a real CommonMark parser (markdown-it-py)."""
from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import pymupdf
import pytest
from markdown_it import MarkdownIt

from rag_core.answer.grounding.citations import citation_json
from rag_core.answer.grounding.evidence import verify_answer
from rag_core.core.models import Answer, Chunk, Citation, Passage, SourceMeta
from rag_core.service import render

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src="http://evil.example/x.png" onerror="alert(1)">',
    "[click](javascript:alert(1)) and ![pixel](http://evil.example/p.png)",
    "<http://evil.example/auto> &amp; &#60;b&#62;",
    "# Heading\n\n1. item\n- bullet\n> quote\n\n    code block",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "*em* **strong** _u_ ~~s~~ `code` $x^2$ :red[colour] :material/home: :smile:",
    "back\\slash \\[not a marker\\] trailing \\",
    "Ünïcödé — “quotes” 中文 العربية",
]


def _html_text(markdown: str) -> tuple[str, set[str]]:
    """(visible text, tag names) of the HTML a CommonMark renderer makes of `markdown`."""
    out = MD.render(markdown)
    tags = set(re.findall(r"<\s*([a-zA-Z0-9]+)", out))
    return html.unescape(re.sub(r"<[^>]+>", "", out)).replace(render.WORD_JOINER, "").strip(), tags


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_renders_as_exactly_that_text(text):
    md = render.escape_markdown(text)
    shown, tags = _html_text(md)
    assert tags == {"p"}, f"markup leaked: {tags} from {md!r}"
    assert shown == " ".join(text.split())
    # Streamlit-only syntax cannot start either: every ':', '$', '[' is escaped.
    assert not re.search(r"(?<!\\)[:$\[\]<>!]", md)


# The autolink-literal step of Streamlit's Markdown (mdast-util-gfm-autolink-literal, in
# streamlit/static/static/js/StreamlitMarkdown.*.js) runs on the text *after* escapes are resolved, with these
# patterns: /(https?:\/\/|www(?=\.))([-.\w]+)([^ \t\r\n]*)/gi and /([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)/gu.
_GFM_URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)", re.IGNORECASE | re.ASCII)
_GFM_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII)


def _autolinks(markdown: str) -> list[str]:
    """What GFM's autolink-literal step would turn into links in this Markdown (escapes resolved first)."""
    visible = re.sub(r"\\(.)", r"\1", markdown)
    return [m.group(0) for rx in (_GFM_URL, _GFM_EMAIL) for m in rx.finditer(visible)]


@pytest.mark.parametrize("text", ["see https://evil.example/x now", "www.evil.example", "mail me@evil.example",
                                  "HTTP://EVIL.EXAMPLE", "WwW.Evil.Example", "mailto:me@evil.example"])
def test_bare_links_are_broken_by_an_invisible_joiner(text):
    streamed = "".join(map(render.StreamEscaper().feed, text))  # one character at a time
    for md in [render.escape_markdown(text), render.reply_markdown(text), render.message_markdown(text), streamed]:
        assert _autolinks(md) == [], md
        visible = re.sub(r"\\(.)", r"\1", md)
        assert visible.replace(render.WORD_JOINER, "").strip() == text


STREAMED = ("The capital of Belgium is Brussels [1]. See www.evil.example, WWW.x.org [2] or https://evil.example/x "
            "(http://a.b), mail me@evil.example:[1, 3] or write to mailto:you@x.org. Done [2-4].\n- www.list.example [1]")


def test_a_streamed_reply_forms_no_autolink_wherever_it_is_cut():
    """Every way of cutting the reply in two, and one character at a time: the joined pieces are the whole reply
    escaped, no autolink forms, and the reply reads exactly as written."""
    whole = render.escape_stream(STREAMED)
    assert _autolinks(whole) == [] and re.sub(r"\\(.)", r"\1", whole).replace(render.WORD_JOINER, "") == \
        STREAMED.replace("\n", "  \n")
    cuts = [[STREAMED[:i], STREAMED[i:]] for i in range(len(STREAMED) + 1)] + [list(STREAMED)]
    for pieces in cuts:
        escaper = render.StreamEscaper()
        shown = ""
        for piece in pieces:
            shown += escaper.feed(piece)
            assert _autolinks(shown) == [], (pieces, shown)  # not even mid-stream
        assert shown == whole, pieces


def test_joiners_sit_only_inside_autolinks_and_never_touch_the_bold_markers():
    """A joiner before every dot once broke the reply's **[n]** markers (a "**" next to an invisible character is
    not a delimiter) and copied text: only the autolink forms get one, and every marker still renders bold."""
    md = render.reply_markdown(STREAMED)
    assert md.count(render.WORD_JOINER) == 7  # 3 × "www.", 2 × "://", 2 × "@" (a colon alone gets none)
    assert "Brussels **\\[1\\]**\\." in md and "Done **\\[2\\-4\\]**\\." in md
    strong = re.findall(r"<strong>(.*?)</strong>", MD.render(md))
    assert strong == ["[1]", "[2]", "[1, 3]", "[2-4]", "[1]"]
    plain_text = "The capital of Belgium is Brussels [1]. Paris is in France [2]: big. Vienna. (1.5) x.y"
    assert render.WORD_JOINER not in render.reply_markdown(plain_text) + render.escape_stream(plain_text)


def test_escape_keeps_paragraphs_when_asked_and_drops_control_characters():
    md = render.escape_markdown("one\u202e two\n\n\nthree\x00", keep_newlines=True)
    assert md == "one two\n\nthree"


@pytest.mark.parametrize("text", HOSTILE)
def test_streamed_reply_pieces_escape_like_the_whole(text):
    pieces = [text[i:i + 3] for i in range(0, len(text), 3)]
    escaper = render.StreamEscaper()
    assert "".join(escaper.feed(p) for p in pieces) == render.escape_stream(text)
    _, tags = _html_text(render.escape_stream(text))
    assert tags <= {"p", "br", "pre", "code"}  # an indented line may show as a (literal) code block mid-stream


def test_reply_keeps_lists_and_bolds_markers_but_nothing_else():
    reply = ("Quoted:\n\n- “Paris is big.” [1]\n- It has <b>bold</b> claims [1, 3]\n1. first [2-4]\n"
             "See [link](javascript:x) ![i](http://e/i.png)")
    shown, tags = _html_text(render.reply_markdown(reply))
    assert {"ul", "ol", "li", "strong"} <= tags <= {"p", "ul", "li", "ol", "strong", "br"}
    assert "<b>bold</b>" in shown and "[link](javascript:x)" in shown and "![i](http://e/i.png)" in shown
    strong = re.findall(r"<strong>(.*?)</strong>", MD.render(render.reply_markdown(reply)))
    assert strong == ["[1]", "[1, 3]", "[2-4]"]


def test_highlight_marks_the_evidence_and_trims_long_context():
    text = "A" * 50 + " lead words. " + "x " * 400 + "The cited sentence here. " + "y " * 400 + "end"
    start = text.index("The cited")
    end = start + len("The cited sentence here.")
    md = render.highlight_markdown(text, start, end, context=100)
    assert ":orange-background[**The cited sentence here\\.**]" in md
    assert md.startswith("…") and md.endswith("…")
    assert len(md) < 400
    # Without a valid span it is the plain escaped (trimmed) passage.
    plain = render.highlight_markdown("a <b> c", None, None)
    assert plain == "a \\<b\\> c"
    assert render.highlight_markdown("short", 3, 99) == "short"


def test_highlighted_evidence_cannot_break_out_of_the_directive():
    text = "before ]] **x** [y](javascript:z) after"
    md = render.highlight_markdown(text, 7, 33)
    inner = md[md.index(":orange-background[") + len(":orange-background["):md.rindex("]")]
    assert not re.search(r"(?<!\\)[\[\]]", inner)


def test_messages_keep_code_spans_and_escape_the_rest():
    md = render.message_markdown("“<b>x</b>.pdf”: locked. Run `ollama pull llama3.2:3b` then retry.")
    out = MD.render(md)
    assert "<code>ollama pull llama3.2:3b</code>" in out
    assert "&lt;b&gt;x&lt;/b&gt;.pdf" in out and "<b>" not in out


@pytest.mark.parametrize("url,anchor,expected", [
    ("https://en.wikipedia.org/wiki/Python_(programming_language)", "History",
     "https://en.wikipedia.org/wiki/Python_(programming_language)#History"),
    ("https://de.wikipedia.org/wiki/K%C3%B6ln", None, "https://de.wikipedia.org/wiki/K%C3%B6ln"),
    ("https://simple.m.wikipedia.org/wiki/Cat#Food", None, "https://simple.m.wikipedia.org/wiki/Cat#Food"),
    ("http://en.wikipedia.org/wiki/X", None, None),
    ("https://en.wikipedia.org.evil.example/wiki/X", None, None),
    ("https://evil.example/en.wikipedia.org", None, None),
    ("https://user@en.wikipedia.org/wiki/X", None, None),
    ("https://en.wikipedia.org:8443/wiki/X", None, None),
    ("javascript:alert(1)//en.wikipedia.org", None, None),
    ("", None, None),
])
def test_only_https_wikipedia_links_are_made(url, anchor, expected):
    assert render.safe_wikipedia_url(url, anchor) == expected


def test_link_markdown_cannot_be_broken_by_the_url_or_label():
    md = render.link_markdown("a](javascript:x) [b", "https://en.wikipedia.org/wiki/A_(b)>x <y")
    out = MD.render(md)
    assert out.count("<a ") == 1
    assert 'href="https://en.wikipedia.org/wiki/A_(b)%3Ex%20%3Cy"' in out


def _chunk(text: str, page_start=None, page_end=None, heading=(), kind="pdf", url=None, anchor=None) -> Chunk:
    return Chunk(doc_id="d1", index=0, text=text, char_start=0, char_end=len(text), page_start=page_start,
                 page_end=page_end, heading_path=heading, anchor=anchor,
                 source=SourceMeta(file_name="f", title="T", kind=kind, sha256="0", url=url))


def test_location_labels():
    assert render.location_label(_chunk("x", 3, 3)) == "page 3"
    assert render.location_label(_chunk("x", 2, 3, ("Intro", "Scope"))) == "pages 2–3, section Intro › Scope"
    assert render.location_label(_chunk("x")) == ""


def test_an_unsupported_citation_is_shown_without_a_highlighted_sentence(embedder):
    """The page shows exactly the verdicts rag_core.answer.grounding.evidence computed: a citation it found unsupported keeps no
    evidence span, so its card highlights nothing (and render has no helper that would make one up)."""
    text = ("Lorem ipsum dolor sit amet, consectetuer elit. Table 1: EU Countries\n"
            "Austria | 8.9 | 83,879 | Vienna | German\n"
            "Belgium | 11.5 | 30,689 | Brussels | Dutch, French, German")
    passage = Passage(_chunk(text), 1.0)
    answer = Answer(text="The capital of Belgium is Paris and it has 99 million people [1].", mode="model",
                    citations=(Citation(1, passage),), passages=(passage,), context_passages=1,
                    question="What is the capital of Belgium?")
    (c,) = verify_answer(answer, embedder).citations
    assert c.status == "unsupported" and c.evidence_start is None and c.evidence_end is None
    md = render.highlight_markdown(c.passage.chunk.text, c.evidence_start, c.evidence_end)
    assert f":{render.HIGHLIGHT_COLOR}-background[" not in md
    assert citation_json(c)["quote"] == text  # the whole passage: no sentence is presented as the evidence
    assert not hasattr(render, "with_evidence") and not hasattr(render, "evidence_span")

    backed = replace(answer, text="Brussels is the capital of Belgium [1].")
    (good,) = verify_answer(backed, embedder).citations
    assert good.status == "verified"
    md = render.highlight_markdown(text, good.evidence_start, good.evidence_end)
    assert f":{render.HIGHLIGHT_COLOR}-background[**Belgium" in md


def _orange_pixels(png: bytes) -> int:
    pix = pymupdf.Pixmap(png)
    n = 0
    for y in range(0, pix.height, 2):
        for x in range(0, pix.width, 2):
            r, g, b = pix.pixel(x, y)[:3]
            if r > 230 and 130 < g < 190 and b < 90:
                n += 1
    return n


def test_pdf_page_is_drawn_with_the_cited_row_highlighted_on_the_right_page():
    pdf = (DOCS / "pdf_text_multicolumn_3-pages.pdf").read_bytes()
    passage = "Austria | 8.9 | 83,879 | Vienna | German\nBelgium | 11.5 | 30,689 | Brussels | Dutch, French, German"
    evidence = "Belgium | 11.5 | 30,689 | Brussels | Dutch, French, German"
    page, png = render.pdf_page_for(pdf, passage, 2, 3, evidence)
    assert page == 3  # the passage spans pages 2-3; the cited row is on page 3
    assert png.startswith(b"\x89PNG")
    assert _orange_pixels(png) > 200
    plain = render.render_pdf_page(pdf, 3, passage, None)
    assert _orange_pixels(plain) == 0  # without evidence only the light passage colour is used
    # The original bytes are untouched (annotations go on an in-memory copy).
    assert pdf == (DOCS / "pdf_text_multicolumn_3-pages.pdf").read_bytes()


def test_pdf_rendering_failures_return_none():
    pdf = (DOCS / "pdf_text_4-pages_pdflatex.pdf").read_bytes()
    assert render.render_pdf_page(pdf, 9, "x") is None
    assert render.render_pdf_page(b"not a pdf", 1, "x") is None
    assert render.render_pdf_page((DOCS / "pdf_encrypted_user-password.pdf").read_bytes(), 1, "x") is None
    assert render.pdf_page_for(pdf, "x", None) is None


def test_labels_for_people():
    assert render.kind_label("docx") == "Word" and render.kind_label("wikipedia") == "Wikipedia"
    assert render.date_label("not a date") == ""
    assert re.fullmatch(r"\d{1,2} \w{3} 2026, \d\d:\d\d", render.date_label("2026-11-29T17:55:00+00:00"))


def test_a_huge_page_is_drawn_within_the_pixel_cap():
    import pymupdf

    from rag_core.service.render import MAX_PAGE_PIXELS, render_pdf_page

    doc = pymupdf.open()
    page = doc.new_page(width=11000, height=11000)  # MuPDF refuses to draw this at 2x ("Overly large image")
    page.insert_text((500, 500), "The giant poster says hello to every visitor.", fontsize=60)
    pdf = doc.tobytes()
    png = render_pdf_page(pdf, 1, "The giant poster says hello to every visitor.", crop=False)
    assert png is not None
    pix = pymupdf.Pixmap(png)
    assert pix.width * pix.height <= MAX_PAGE_PIXELS
    assert render_pdf_page(pdf, 2, "no such page") is None


def test_a_reply_marks_the_sentences_its_citations_do_not_back(embedder):
    text = "Brussels is the capital of Belgium [1]. Brussels has no mayor and nobody there ever votes [1]. Bye."
    passage = Passage(_chunk("The capital of Belgium is Brussels. About 1.2 million people live there."), 1.0)
    answer = verify_answer(Answer(text=text, mode="model", citations=(Citation(1, passage),), passages=(passage,),
                                  context_passages=1, question="What is the capital of Belgium?"), embedder)
    from rag_core.answer.grounding.evidence import unbacked_sentences

    spans = [(s.start, s.end) for s in unbacked_sentences(answer)]
    assert [text[s:e] for s, e in spans] == ["Brussels has no mayor and nobody there ever votes [1]."]
    md = render.reply_markdown(text, spans)
    assert md.count(render.UNBACKED_MARK) == 1
    assert "votes **\\[1\\]**\\. " + render.UNBACKED_MARK + " Bye\\." in md  # right after the sentence it marks
    assert re.findall(r"<strong>(.*?)</strong>", MD.render(md)) == ["[1]", "[1]"]  # the markers stay bold
    assert render.reply_markdown(text) == md.replace(" " + render.UNBACKED_MARK, "")  # nothing else changes


def test_marks_cannot_be_forged_or_misplaced_by_the_reply():
    forged = "A claim \ue000 with the placeholder character [1]."
    md = render.reply_markdown(forged)
    assert render.UNBACKED_MARK not in md and "\ue000" not in md and "\ufffd" in md
    assert render.reply_markdown("One. Two.", [(0, 99), (5, 3), (-1, 2)]) == render.reply_markdown("One. Two.")
    assert render.reply_markdown("\r\nOne.\r\nTwo.", [(2, 6)]) == "One\\. " + render.UNBACKED_MARK + "  \nTwo\\.  "


SCANNED_SENTENCE = ("The LinnSequencer is a state-of-the-art composition and performance tool for the professional "
                    "musician")  # as the loader recognises it on page 1 of the scan below


@pytest.mark.slow
def test_a_passage_on_a_scanned_page_is_found_by_recognising_the_page_again():
    from rag_core.ingest.loaders.ocr import OcrOptions, find_tessdata, installed_languages

    if "eng" not in installed_languages(find_tessdata()):
        pytest.skip("Tesseract with the English pack is not installed (make ocr)")
    pdf = (DOCS / "pdf_scanned_image-only_two-columns.pdf").read_bytes()
    off = render.render_pdf_page(pdf, 1, SCANNED_SENTENCE, SCANNED_SENTENCE, crop=False, ocr=OcrOptions(enabled=False))
    assert off is not None and _orange_pixels(off) == 0  # a scan has no text layer to search
    found = render.pdf_page_for(pdf, SCANNED_SENTENCE, 1, None, SCANNED_SENTENCE)  # ~7 s: one page recognised
    assert found is not None and found[0] == 1
    assert _orange_pixels(found[1]) > 200
    whole = render.render_pdf_page(pdf, 1, "x", None, crop=False, ocr=OcrOptions(enabled=False))
    assert pymupdf.Pixmap(found[1]).width < pymupdf.Pixmap(whole).width  # cut to the area around the words
