"""CSV for spreadsheets, safe to open: every CSV the server writes goes through `CSVRenderer`."""

import csv
import io
import re

from django.utils import timezone
from rest_framework import renderers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

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


class CSVExportMixin:
    """For a view with a CSV download: errors stay JSON in the one error shape even when CSV was asked for, and
    a download answers with an attachment name. `csv_export(request, queryset, serializer_class, name)` renders
    up to `CSV_EXPORT_MAX_ROWS` rows of the filtered, ordered list (no paging)."""

    CSV_EXPORT_MAX_ROWS = 10_000

    def csv_export(self, request, queryset, serializer_class, name: str):
        rows = serializer_class(queryset[:self.CSV_EXPORT_MAX_ROWS], many=True,
                                context=self.get_serializer_context()).data
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        return Response(rows, headers={"Content-Disposition": f'attachment; filename="{name}-{stamp}.csv"'})

    def finalize_response(self, request, response, *args, **kwargs):
        # Also when content negotiation itself failed (`?format=nonsense`): DRF would pick the first renderer.
        accepted = getattr(request, "accepted_renderer", None)
        if response.status_code >= 400 and (accepted is None or isinstance(accepted, CSVRenderer)):
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
