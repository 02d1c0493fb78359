"""JSON columns the cycle reads as text: decoded once per distinct value, whatever the text holds."""

from fleet.health.services.facts import _JsonCache


def test_text_orjson_refuses_still_decodes_like_json():
    """A JSON column written through a path that parsed with `json` may hold what orjson refuses (an escaped
    lone surrogate); the node keeps its facts."""
    decode = _JsonCache()
    assert decode('["\\ud800"]') == ["\ud800"]
    assert decode('{"a": 1.5, "b": [true, null], "c": 18446744073709551615}') == {
        "a": 1.5, "b": [True, None], "c": 18446744073709551615}


def test_one_decode_per_distinct_text_and_none_stays_none():
    decode = _JsonCache()
    first = decode('{"volumes": []}')
    assert decode('{"volumes": []}') is first
    assert decode(None) is None
    assert decode({"already": "decoded"}) == {"already": "decoded"}
