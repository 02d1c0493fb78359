"""Hypothesis strategies for agent reports, derived from the agent's JSON Schema.

Every value the schema allows, biased towards the edges where servers break: strings with NULs, right-to-left
marks and astral characters, strings exactly as long as the schema allows, the extreme integers of each range,
the largest and smallest floats, timestamps at the calendar's edges and in odd offsets, nested free-form objects
as deep as the schema permits. Now and then a value just outside the schema (one past a bound, a wrong type), so
the test also sees what the server does with what the schema refuses: a 400, never a 500.
"""

from datetime import datetime, timedelta, timezone

from hypothesis import strategies as st

from fleet_agent.schema import report_schema

ODD_CHARACTERS = ["\x00", "\u202e", "\ufeff", "\u0301", "\U0001f4a5", "\n", "\\", '"', "'", "%", "\x7f", "\u2028"]
EDGE_TIMESTAMPS = [
    "0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59Z",
    "1970-01-01T00:00:00Z", "1999-12-31T23:59:59Z", "2000-01-01T00:00:00Z", "2026-02-30T00:00:00Z",
    "2026-06-30T23:59:60Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00+99:99", "2026-01-01T00:00:00-00:00",
    "2026-01-01T00:00:00.123456789012345678901234Z",
]
EDGE_FLOATS = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 1.0, 1e15, 1e300, 1.7976931348623157e308]
INT64 = 2**63 - 1


def report_strategy(*, now: datetime, nasty: float = 0.0) -> st.SearchStrategy[dict]:
    """One report; `nasty` is the share of values drawn from just outside the schema (0: all inside it, but for
    one timestamp in twenty from the calendar's edges)."""
    schema = report_schema()
    return _Builder(schema["$defs"], now, nasty).build(schema["$defs"]["report"])


class _Builder:
    def __init__(self, defs: dict, now: datetime, nasty: float):
        self.defs = defs
        self.now = now
        self.nasty = nasty
        self.cache: dict[str, st.SearchStrategy] = {}

    def build(self, node: dict, name: str = "") -> st.SearchStrategy:
        if "$ref" in node:
            ref = node["$ref"].rsplit("/", 1)[-1]
            if ref not in self.cache:
                self.cache[ref] = st.deferred(lambda: self._named(ref))
            return self.cache[ref]
        if "anyOf" in node:
            return st.one_of([self.build(option, name) for option in node["anyOf"]])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        types = node.get("type", ["string", "number", "boolean", "null"])
        types = types if isinstance(types, list) else [types]
        strategies = [self._typed(kind, node, name) for kind in types]
        if "integer" in types:  # JSON has no integer type: 8.0 is an integer to the schema, a float to Python
            strategies.append(st.integers(node.get("minimum", -(2**53)), node.get("maximum", 2**53)).map(float))
        return st.one_of(strategies)

    def _named(self, ref: str) -> st.SearchStrategy:
        if ref == "timestamp":
            return self.timestamps()
        if ref == "uuid4":
            return st.one_of(st.uuids(version=4).map(str), st.uuids(version=4).map(lambda u: str(u).upper()))
        return self.build(self.defs[ref], ref)

    def _typed(self, kind: str, node: dict, name: str) -> st.SearchStrategy:
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind == "integer":
            return self.integers(node.get("minimum", -INT64 - 1), node.get("maximum", INT64))
        if kind == "number":
            return self.numbers(node.get("minimum"), node.get("maximum"), node.get("exclusiveMinimum"))
        if kind == "string":
            return self.strings(node)
        if kind == "array":
            items = self.build(node.get("items", {}), name)
            return st.lists(items, max_size=min(node.get("maxItems", 2), 2))
        if kind == "object":
            return self.objects(node, name)
        raise ValueError(f"no strategy for type {kind!r}")

    def outside(self, inside: st.SearchStrategy, wrong: list) -> st.SearchStrategy:
        if not wrong or self.nasty <= 0:
            return inside
        weight = max(1, round((1 - self.nasty) / self.nasty))
        return st.one_of(*([inside] * weight), st.sampled_from(wrong))

    def integers(self, low: int, high: int) -> st.SearchStrategy:
        landmarks = (0, 2**31 - 1, 2**31, 2**53 - 1, 2**53, high - 1, low + 1)
        edges = sorted({low, high} | {min(max(x, low), high) for x in landmarks})
        inside = st.one_of(st.integers(low, high), st.sampled_from(edges))
        return self.outside(inside, [low - 1, high + 1, 2**64, -(2**63) - 1, "1", True])

    def numbers(self, low, high, exclusive_low) -> st.SearchStrategy:
        biggest = 1.7976931348623157e308
        floor = exclusive_low if exclusive_low is not None else (low if low is not None else -biggest)
        ceiling = high if high is not None else biggest
        edges = [x for x in [*EDGE_FLOATS, ceiling, -ceiling] if x <= ceiling
                 and (x > floor if exclusive_low is not None else x >= floor)]
        finite = st.floats(min_value=floor, max_value=ceiling, allow_nan=False, allow_infinity=False,
                           exclude_min=exclusive_low is not None)
        whole = st.integers(max(int(floor) + (exclusive_low is not None), -(10**6)), int(min(ceiling, 10**6)))
        wrong = ([ceiling * 10] if high is not None else []) + ([floor - 1] if low is not None else []) + ["NaN"]
        return self.outside(st.one_of(finite, st.sampled_from(edges), whole), wrong)

    def strings(self, node: dict) -> st.SearchStrategy:
        pattern = node.get("pattern")
        limit = node.get("maxLength", 4096)
        if pattern == "^[0-9]+\\.[0-9]+$":
            return self.outside(st.from_regex(r"\A[0-9]{1,3}\.[0-9]{1,3}\Z"), ["9", "x.y"])
        if pattern == "^[0-9a-f]{64}$":
            return st.text("0123456789abcdef", min_size=64, max_size=64)
        if pattern == "^1\\.[0-9]+$":
            return self.outside(st.sampled_from(["1.0", "1.1", "1.99"]), ["2.0", "1", "x.0", ""])
        low = node.get("minLength", 0)
        alphabet = st.one_of(st.characters(blacklist_categories=("Cs",)), st.sampled_from(ODD_CHARACTERS))
        short = st.text(alphabet, min_size=low, max_size=min(limit, 12))
        full = st.sampled_from(["a", "é", "\x00", "\U0001f4a5"]).map(lambda c: c * limit)
        return self.outside(st.one_of(short, short, full), ["x" * (limit + 1), 7, None])

    def objects(self, node: dict, name: str) -> st.SearchStrategy:
        properties = node.get("properties")
        if properties is None:  # free-form (notice.detail): the schema bounds its depth via additionalProperties
            values = self.build(node.get("additionalProperties", {}), name)
            keys = st.text(st.sampled_from(["k", "\x00", "\U0001f4a5", "é"]), max_size=8)
            return st.dictionaries(keys, values, max_size=3)
        required = set(node.get("required", []))
        fixed = {key: self.build(sub, key) for key, sub in properties.items() if key in required}
        optional = {key: self.build(sub, key) for key, sub in properties.items() if key not in required}
        return st.fixed_dictionaries(fixed, optional=optional)

    def timestamps(self) -> st.SearchStrategy:
        def render(seconds: int, offset_minutes: int, fraction: bool) -> str:
            zone = timezone(timedelta(minutes=offset_minutes))
            text = (self.now + timedelta(seconds=seconds)).astimezone(zone).isoformat(
                timespec="microseconds" if fraction else "seconds")
            return text.replace("+00:00", "Z")

        recent = st.builds(render, st.integers(-7 * 86400, 4 * 60), st.sampled_from([0, 0, 60, -300, 330, 840, -720]),
                           st.booleans())
        if self.nasty:
            return self.outside(recent, EDGE_TIMESTAMPS)
        # Hypothesis favours the ends of a range and the first branches; this keeps edges to about one in twenty.
        pick = st.tuples(st.integers(0, 999), recent, st.sampled_from(EDGE_TIMESTAMPS))
        return pick.map(lambda t: t[2] if 400 <= t[0] < 450 else t[1])
