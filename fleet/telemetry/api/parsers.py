"""A JSON parser for unauthenticated agent endpoints that cannot be pushed into a server error."""

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser


class StrictJSONParser(BaseParser):
    """orjson instead of the standard library: it refuses nesting deeper than 1024 levels with a decode error
    (a 400) where `json` raises RecursionError (a 500), and it refuses lone surrogates that no database text
    column can hold."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return orjson.loads(stream.read())
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
