"""Spreadsheets (rag_core.ingest.loaders.sheets): Excel workbooks and CSV/TSV files to text with a section per sheet,
rows under their header (also after chunking), formulas' saved values, hidden sheets said, limits bounded."""
from __future__ import annotations

import codecs
import io
import time
import tracemalloc
import zipfile
from pathlib import Path

import openpyxl
import pytest

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, NoText
from rag_core.core.models import Document, Passage, SourceMeta
from rag_core.ingest.chunking import chunk_document
from rag_core.ingest.loaders._common import Extracted
from rag_core.ingest.loaders.sheets import MAX_COLUMNS, format_number, load_csv, load_xlsx, read_csv, read_xlsx

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
WORKBOOK = "office_workbook_budget-formula-hidden.xlsx"
SETTINGS = Settings()
BUDGET_HEADER = "Item | Budget (EUR) | Spent (EUR) | Notes"
TRAVEL_ROW = "Travel | 12,000 | 3,400 | Conferences and site visits"


def xlsx(name: str = WORKBOOK, settings: Settings = SETTINGS, data: bytes | None = None) -> Extracted:
    data = (DOCS / name).read_bytes() if data is None else data
    return read_xlsx(data, name, settings, Deadline.never(name))


def csv_file(data: bytes, name: str, settings: Settings = SETTINGS) -> Extracted:
    return read_csv(data, name, settings, Deadline.never(name))


def document(ex: Extracted, name: str, kind: str) -> Document:
    return Document(doc_id="d" * 16, text=ex.text, sections=ex.sections, page_count=ex.page_count,
                    page_starts=ex.page_starts, source=SourceMeta(file_name=name, title=ex.title, kind=kind, sha256=""))


def section_texts(ex: Extracted) -> list[tuple[tuple[str, ...], str]]:
    return [(s.heading_path, ex.text[s.char_start:s.char_end]) for s in ex.sections]


def workbook_bytes(fill) -> bytes:
    """A workbook made with openpyxl; `fill(wb)` adds its sheets."""
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    fill(wb)
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


# --------------------------------------------------------------------------- the fixture workbook
def test_workbook_has_a_section_per_visible_sheet_and_its_core_title() -> None:
    ex = xlsx()
    assert ex.title == "Aurora budget 2024"
    assert ex.page_count is None and ex.page_starts == ()
    paths = [path for path, _ in section_texts(ex)]
    assert paths == [(), ("Budget",), ("Staff",), ("Staff",)]  # notes; Budget; Staff: line above the table, table
    budget = dict(section_texts(ex))[("Budget",)]
    assert budget.startswith("Sheet: Budget\n\n" + BUDGET_HEADER + "\n" + TRAVEL_ROW + "\n")


def test_rows_are_whole_lines_without_empty_rows_or_columns() -> None:
    lines = xlsx().text.split("\n")
    assert BUDGET_HEADER in lines  # column D (empty) dropped
    i = lines.index(BUDGET_HEADER)
    # the empty row between Training and Total is dropped; Total is a formula: its saved value is read
    assert lines[i + 1:i + 5] == [TRAVEL_ROW, "Equipment | 8,500 | 8,100 | Test rigs", "Training | 4,000 | 0 | ",
                                  "Total | 24,500 | 11,500 | "]


def test_formula_cells_give_the_value_saved_with_them() -> None:
    assert "Total | 24,500 | 11,500" in xlsx().text
    assert "SUM(" not in xlsx().text


def test_dates_percentages_and_lines_above_the_table() -> None:
    staff = [text for path, text in section_texts(xlsx()) if path == ("Staff",)]
    assert staff[0] == "Sheet: Staff\nStaff list, spring 2024\n\n"  # a section of its own, above the table
    assert staff[1].split("\n")[:3] == ["Name | Role | Start date | Time on project",
                                         "Alice Martin | Project lead | 2023-09-01 | 100%",
                                         "Bob Chen | Engineer | 2024-01-15 | 50%"]


def test_hidden_sheet_is_not_read_and_the_text_says_so() -> None:
    ex = xlsx()
    assert "secret salary" not in ex.text and "Salaries |" not in ex.text
    first = section_texts(ex)[0]
    assert first == ((), "Sheet “Salaries” is hidden in the workbook and was not read.\n\n")


def test_title_falls_back_to_the_file_name() -> None:
    data = workbook_bytes(lambda wb: wb.create_sheet("Plan").append(["a", "b"]))
    assert read_xlsx(data, "folder/Plan 2024.xlsx", SETTINGS, Deadline.never("x")).title == "Plan 2024"


def test_a_workbook_without_text_is_no_text() -> None:
    def fill(wb):
        wb.create_sheet("Empty")
        wb.create_sheet("Hidden").sheet_state = "hidden"
        wb["Hidden"].append(["only", "hidden"])

    with pytest.raises(NoText):
        xlsx("empty.xlsx", data=workbook_bytes(fill))


@pytest.mark.parametrize(("value", "number_format", "shown"), [
    (12000, "#,##0", "12,000"), (12000, "General", "12000"), (2024, "0", "2024"), (0.5, "0%", "50%"),
    (0.1234, "0.00%", "12.34%"), (3400.5, "#,##0.00", "3,400.50"), (1234.5, "[$€-407] #,##0.00", "€ 1,234.50"),
    (1234.5, '"$"#,##0.00', "$1,234.50"), (-1234.5, "#,##0.00;[Red]-#,##0.00", "-1,234.50"),
    (123456789, "0.00E+00", "1.23E+08"), (0.1 + 0.2, "General", "0.3"), (42, "@", "42"), (5, '0 "units"', "5 units"),
])
def test_numbers_are_written_as_their_format_shows_them(value: float, number_format: str, shown: str) -> None:
    assert format_number(value, number_format) == shown


# --------------------------------------------------------------------------- rows keep their header in passages
def test_every_passage_of_a_long_sheet_starts_its_rows_with_the_header(embedder) -> None:
    header = ["Item", "Budget (EUR)", "Spent (EUR)", "Owner", "Cost centre"]

    def fill(wb):
        ws = wb.create_sheet("Budget")
        ws.append(header)
        for i in range(300):
            item = "Travel" if i == 250 else f"Line item {i}"
            ws.append([item, 12000 if i == 250 else 1000 + i, 500 + i, f"Owner {i % 7}", f"CC-{i:04d}"])
        for row in ws.iter_rows(min_row=2, min_col=2, max_col=3):
            for cell in row:
                cell.number_format = "#,##0"

    name = "budget.xlsx"
    doc = document(xlsx(name, data=workbook_bytes(fill)), name, "xlsx")
    chunks = chunk_document(doc, embedder, SETTINGS.ingest.chunk_tokens)
    header_line = " | ".join(header)
    with_rows = [c for c in chunks if " | " in c.text]
    assert len(with_rows) > 5  # the sheet is far longer than one passage
    for chunk in with_rows:
        rows = [line for line in chunk.text.split("\n") if " | " in line]
        assert rows[0] == header_line, chunk.text[:200]
        assert chunk.heading_path == ("Budget",)
    from rag_core.answer.grounding.quotes import quote_text, rank_quotes

    passages = [Passage(c, 1.0) for c in with_rows if "Travel" in c.text]
    best = rank_quotes("What is the budget for travel?", passages)[0]
    assert quote_text(passages[best.n - 1].chunk.text, best) == (
        f"{header_line} … Travel | 12,000 | 750 | Owner 5 | CC-0250")


def test_rows_in_another_script_also_keep_their_header(embedder) -> None:
    # The model splits Cyrillic words into about one piece a letter: blocks are sized for that, not for English.
    header = "Город | Область | Население"
    data = (header.replace(" | ", ",") + "\n" + "".join(
        f"Новосибирск-{i},Новосибирская область,{1_600_000 + i}\n" for i in range(200))).encode()
    doc = document(csv_file(data, "города.csv"), "города.csv", "csv")
    chunks = chunk_document(doc, embedder, SETTINGS.ingest.chunk_tokens)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text.split("\n")[0] == header, chunk.text[:200]


# --------------------------------------------------------------------------- bounds
def _big_sheet(rows: int) -> bytes:
    """A workbook made with openpyxl (write-only) whose sheet is grown to `rows` data rows of numbers, with the
    <dimension> Excel writes; built as text, as openpyxl takes seconds to write 100,000 rows."""
    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("Data")
    ws.append(["Id", "Amount", "Share"])
    buf = io.BytesIO()
    wb.save(buf)
    body = "".join(f'<row r="{i}"><c r="A{i}" t="n"><v>{i}</v></c><c r="B{i}" t="n"><v>{i * 3}</v></c>'
                   f'<c r="C{i}" t="n"><v>{i % 97}</v></c></row>' for i in range(2, rows + 2)).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(b"</row></sheetData>", b"</row>" + body + b"</sheetData>")
                data = data.replace(b"<sheetPr>", f'<dimension ref="A1:C{rows + 1}"/><sheetPr>'.encode(), 1)
            dst.writestr(info, data)
    return out.getvalue()


def test_a_100000_row_sheet_is_read_up_to_the_row_limit_in_bounded_time_and_memory() -> None:
    data = _big_sheet(100_000)
    settings = Settings(max_sheet_rows=1000)
    start = time.process_time()
    ex = xlsx("big.xlsx", settings, data)
    cpu = time.process_time() - start
    rows = [line for line in ex.text.split("\n") if " | " in line and line != "Id | Amount | Share"]
    assert len(rows) == 999  # the header row counts as one of the 1,000
    assert rows[-1] == "1000 | 3000 | 30"
    assert ex.text.startswith("The rows of sheet “Data” from row 1,001 on were not read (it has 100,001 rows): "
                              "DocChat reads at most 1,000 rows of a spreadsheet.")
    # Reading stops at the limit: the 99,000 rows after it are never parsed (all of them take over 10 s here).
    assert cpu < 1.5, f"{cpu:.2f} s of CPU for 1,000 rows"
    tracemalloc.start()
    try:
        xlsx("big.xlsx", settings, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 1024 * 1024  # the sheet's XML alone is 7 MB, its rows as Python objects far more


def test_row_limit_counts_all_sheets_and_names_those_left_out() -> None:
    def fill(wb):
        for name in ("One", "Two", "Three"):
            ws = wb.create_sheet(name)
            for i in range(80):
                ws.append([f"{name} {i}", i])

    ex = xlsx("three.xlsx", Settings(max_sheet_rows=100), workbook_bytes(fill))
    assert [path for path, _ in section_texts(ex)][:2] == [(), ("One",)]
    assert ("Two",) in [path for path, _ in section_texts(ex)] and ("Three",) not in [p for p, _ in section_texts(ex)]
    assert "Two 19 | 19" in ex.text and "Two 20 | 20" not in ex.text
    notes = section_texts(ex)[0][1]
    assert "The rows of sheet “Two” from row 21 on were not read (it has 80 rows): DocChat reads at most 100 rows" in notes
    assert "Sheets not read, as the rows before them reached the limit: “Three”." in notes


def test_a_wide_sheet_keeps_its_first_columns_and_says_so() -> None:
    def fill(wb):
        ws = wb.create_sheet("Wide")
        ws.append([f"c{j}" for j in range(1, 71)])
        ws.append([j for j in range(1, 71)])

    ex = xlsx("wide.xlsx", data=workbook_bytes(fill))
    header = next(line for line in ex.text.split("\n") if line.startswith("c1 |"))
    assert header.split(" | ") == [f"c{j}" for j in range(1, MAX_COLUMNS + 1)]
    assert f"Only the first {MAX_COLUMNS} columns of sheet “Wide” (A to AX) were read" in ex.text


# --------------------------------------------------------------------------- damaged files
def test_a_damaged_zip_is_one_sentence_before_any_reader_starts() -> None:
    data = (DOCS / WORKBOOK).read_bytes()
    with pytest.raises(CorruptFile) as e:
        load_xlsx(data[: len(data) // 2], "budget.xlsx", SETTINGS)
    assert e.value.message == ("“budget.xlsx”: the file is damaged and could not be read (the Excel workbook's ZIP "
                               "container is broken). Try re-downloading or re-exporting it, then upload it again.")


def _replace_member(data: bytes, member: str, content: bytes | None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != member:
                dst.writestr(info, src.read(info.filename))
            elif content is not None:
                dst.writestr(info, content)
    return out.getvalue()


def test_a_damaged_sheet_is_one_sentence() -> None:
    data = _replace_member((DOCS / WORKBOOK).read_bytes(), "xl/worksheets/sheet1.xml", b"<worksheet><sheetData><row")
    with pytest.raises(CorruptFile) as e:
        xlsx("budget.xlsx", data=data)
    assert "“budget.xlsx”: the file is damaged and could not be read" in e.value.message
    assert "\n" not in e.value.message


def test_a_zip_without_a_workbook_is_refused_plainly() -> None:
    data = _replace_member((DOCS / WORKBOOK).read_bytes(), "xl/workbook.xml", None)
    with pytest.raises(CorruptFile, match="the ZIP archive has no xl/workbook.xml, so it is not a Excel workbook|"
                                          "the ZIP archive has no xl/workbook.xml"):
        load_xlsx(data, "budget.xlsx", SETTINGS)


def test_a_zip_bomb_is_refused_before_it_is_unpacked() -> None:
    bomb = _replace_member((DOCS / WORKBOOK).read_bytes(), "xl/worksheets/sheet2.xml", b" " * (3 * 1024 * 1024))
    assert len(bomb) < 60_000
    with pytest.raises(CorruptFile, match="expands to more than 2 MB when unpacked"):
        load_xlsx(bomb, "bomb.xlsx", Settings(max_docx_uncompressed_mb=2))


# --------------------------------------------------------------------------- CSV and TSV
def test_semicolon_latin1_csv() -> None:
    ex = csv_file((DOCS / "sheet_semicolon_latin1.csv").read_bytes(), "sheet_semicolon_latin1.csv")
    assert ex.title == "sheet_semicolon_latin1"
    assert section_texts(ex) == [(("sheet_semicolon_latin1",), (
        "Stadt | Einwohner | Fläche (km²) | Kanton\n"
        "Zürich | 421 878 | 87,88 | ZH\n"
        "Genève | 203 856 | 15,93 | GE\n"
        "Basel; Stadt | 177 595 | 23,91 | BS\n"  # a quoted field keeps its semicolon; the empty row is dropped
        "Bern | 134 591 | 51,62 | BE"))]


def test_tab_separated_tsv() -> None:
    ex = csv_file((DOCS / "sheet_tabs_utf8.tsv").read_bytes(), "sheet_tabs_utf8.tsv")
    assert ex.text.split("\n") == ["Country | Capital | Population", "France | Paris | 68,000,000",
                                   "Portugal | Lisbon | 10,400,000", "Estonia | Tallinn, Harju | 1,370,000"]


@pytest.mark.parametrize("bom, encoding", [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le")])
def test_csv_with_a_byte_order_mark(bom: bytes, encoding: str) -> None:
    data = bom + "Name,Città\r\nAda,Torino\r\n".encode(encoding)
    assert csv_file(data, "people.csv").text == "Name | Città\nAda | Torino"


def test_csv_with_an_unclosed_quote_is_read_with_the_quote_as_a_character() -> None:
    """A stray quote made the rest of the file one field (and the file was refused past the field limit): the file
    is read again with quotes as ordinary characters (issue 47, second pass)."""
    data = b'size,screen\n1,"never closed 5\n2,15 inch\n' + b"3,x\n" * 50_000
    ex = csv_file(data, "broken.csv")
    assert 'size | screen\n1 | "never closed 5\n2 | 15 inch\n3 | x' in ex.text


def test_csv_with_a_field_past_the_limit_is_one_sentence() -> None:
    data = b'a,b\n1,"never closed\n' + b"x" * 200_000 + b"\n"
    with pytest.raises(CorruptFile) as e:
        csv_file(data, "broken.csv")
    assert e.value.message.startswith("“broken.csv”: the file is damaged and could not be read (line 3 could not be "
                                      "read: a field is longer than 131,072 characters")


def test_csv_rows_are_bounded() -> None:
    data = ("id,value\n" + "".join(f"{i},{i * 2}\n" for i in range(5000))).encode()
    ex = csv_file(data, "long.csv", Settings(max_sheet_rows=100))
    assert ex.text.startswith("The rows of this file from row 101 on were not read: DocChat reads at most 100 rows")
    assert "98 | 196" in ex.text and "99 | 198" not in ex.text


def test_load_functions_read_in_the_child_process() -> None:
    assert load_xlsx((DOCS / WORKBOOK).read_bytes(), WORKBOOK, SETTINGS) == xlsx()
    data = (DOCS / "sheet_tabs_utf8.tsv").read_bytes()
    assert load_csv(data, "sheet_tabs_utf8.tsv", SETTINGS) == csv_file(data, "sheet_tabs_utf8.tsv")
