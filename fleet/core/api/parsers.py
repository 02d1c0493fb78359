"""Request parsers for every API endpoint: a body either parses into values the database can store, or is a 400
that names the offending field.

DRF's stock JSON parser hands deep nesting to `json` (a RecursionError, so a 500), reads a body of any size
into memory, and lets through what PostgreSQL refuses later with a 500: NUL characters in text or keys, lone
surrogates, integers wider than 64 bits. These parsers check all of that once, for every view, so no
serializer has to remember it. (The agent's report endpoint has its own parser with the same limits.)
"""

import codecs

import orjson
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import QueryDict
from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_values(data, *, max_depth: int) -> None:
    """Raise a 400 naming the first value no column could store: NUL in a string or key, an integer beyond
    64 bits, or nesting deeper than `max_depth`. Iterative, so hostile nesting cannot exhaust the stack."""
    stack = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= max_depth:
                raise ParseError(f"JSON is nested deeper than {max_depth} levels (at '{path or '$'}').")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    if "\x00" in key:
                        _invalid(path or "non_field_errors", "Keys may not contain NUL (\\u0000) characters.")
                    child = f"{path}.{key}" if path else key
                else:
                    child = f"{path}[{key}]"
                stack.append((item, child, depth + 1))
        elif isinstance(value, str):
            if "\x00" in value:
                _invalid(path or "non_field_errors", "Null characters are not allowed.")
        elif isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
            _invalid(path or "non_field_errors", "Ensure this value fits in 64 bits.")


def _invalid(field: str, message: str):
    raise ValidationError({field: [message]}, code="invalid")


def _read_limited(stream, request) -> bytes:
    """The body, refusing (413) more than DATA_UPLOAD_MAX_MEMORY_SIZE whatever Content-Length claims."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if stream is None:
        return b""
    if limit is not None:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > limit:
            raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
        return raw
    return stream.read()


class JSONParser(parsers.JSONParser):
    """orjson: rejects NaN/Infinity, lone surrogates and nesting past 1024 levels by itself; then the value
    check above with the API's own (much lower) depth limit."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        request = parser_context.get("request")
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        raw = _read_limited(stream, request)
        try:
            if codecs.lookup(encoding).name != "utf-8":
                raw = raw.decode(encoding).encode("utf-8")
            data = orjson.loads(raw)
        except (orjson.JSONDecodeError, UnicodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        check_values(data, max_depth=settings.API_JSON_MAX_DEPTH)
        return data


def _check_querydict(data) -> None:
    for key, values in data.lists():
        if "\x00" in key:
            _invalid("non_field_errors", "Field names may not contain NUL (\\u0000) characters.")
        for value in values:
            if isinstance(value, str) and "\x00" in value:
                _invalid(key, "Null characters are not allowed.")


class FormParser(parsers.FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        raw = _read_limited(stream, parser_context.get("request"))
        data = QueryDict(raw, encoding=parser_context.get("encoding", settings.DEFAULT_CHARSET))
        _check_querydict(data)
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        result = super().parse(stream, media_type, parser_context)
        _check_querydict(result.data)
        for name, upload in result.files.items():
            if "\x00" in name or "\x00" in (upload.name or ""):
                _invalid(name.replace("\x00", ""), "File names may not contain NUL (\\u0000) characters.")
        return result
