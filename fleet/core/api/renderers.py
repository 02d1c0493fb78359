"""CSV for spreadsheets, safe to open: every CSV the server writes goes through `CSVRenderer`."""

import csv
import io
import re

from rest_framework import renderers

# A cell a spreadsheet would read as a formula (OWASP "CSV injection"): =cmd|..., +HYPERLINK(...), -2+3, @SUM,
# or one that starts with a tab or carriage return, which some spreadsheets skip before looking at the rest.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Plain numbers (a negative cost, -3.5, -1e-3) are left alone: they are data, and quoting them would turn
# them into text in every spreadsheet.
_NUMBER = re.compile(r"-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def csv_cell(value) -> str:
    """One value as CSV cell text: None is empty, lists are joined, and text a spreadsheet would run as a
    formula gets OWASP's prefix, a single quote, so it shows as the text it is."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        value = "; ".join("" if v is None else str(v) for v in value)
    text = str(value)
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


class CSVRenderer(renderers.BaseRenderer):
    """A header row, then one row per item of `rows(data)`, each cell through `csv_cell`."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"
    columns: list[str] = []

    def rows(self, data) -> list[dict]:
        return data or []

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow([csv_cell(column) for column in self.columns])
        for row in self.rows(data):
            writer.writerow([csv_cell(row.get(column)) for column in self.columns])
        return buffer.getvalue().encode(self.charset)
