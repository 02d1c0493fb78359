"""CSV formula injection (OWASP): text a spreadsheet would run is written with a leading single quote."""

import csv
import io

import pytest

from fleet.core.api.renderers import CSVRenderer, csv_cell
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value, written", [
    ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
    ('+HYPERLINK("http://evil.example","x")', '\'+HYPERLINK("http://evil.example","x")'),
    ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
    ("@SUM(1+1)*cmd|' /C calc'!A0", "'@SUM(1+1)*cmd|' /C calc'!A0"),
    ("\t=1+1", "'\t=1+1"),
    ("\r=1+1", "'\r=1+1"),
    ("-", "'-"),
    ("gpu-01", "gpu-01"),
    ("-12.50", "-12.50"),  # a negative amount stays a number
    ("-1e-3", "-1e-3"),
    (-3, "-3"),
    (None, ""),
    (["ok", "=bad"], "ok; =bad"),  # the joined cell starts with "o": nothing to run
    (["=bad", "ok"], "'=bad; ok"),
])
def test_csv_cell(value, written):
    assert csv_cell(value) == written


def test_every_csv_renderer_uses_the_safe_base():
    import importlib
    import pkgutil

    from rest_framework.renderers import BaseRenderer

    import fleet

    for module in pkgutil.walk_packages(fleet.__path__, "fleet."):
        if module.name.endswith("renderers"):
            importlib.import_module(module.name)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    csv_renderers = [cls for cls in subclasses(BaseRenderer)
                     if cls.__module__.startswith("fleet.") and "csv" in (cls.media_type or "")]
    assert csv_renderers
    assert all(issubclass(cls, CSVRenderer) for cls in csv_renderers)


def test_cost_report_csv_escapes_an_enrolled_hostname(viewer_api):
    NodeFactory(hostname="=cmd|' /C calc'!A0")
    NodeFactory(hostname='+HYPERLINK("http://evil.example","x")')
    response = viewer_api.get("/api/v1/cost-report.csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sorted(row["hostname"] for row in rows) == ["'+HYPERLINK(\"http://evil.example\",\"x\")",
                                                       "'=cmd|' /C calc'!A0"]
    for row in rows:
        assert not any(cell.startswith(("=", "+", "@", "\t", "\r")) for cell in row.values())
