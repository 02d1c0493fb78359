"""Server-written texts as message ids with parameters, rendered in the reader's language.

A rule writes `Msg("GPU {gpu} fell off the bus (Xid {xid})", gpu=..., xid=...)`. `str(msg)` is the English text
(the template formatted with its parameters): what the database's plain-text columns, tickets and integrations
keep. `msg.as_json()` is `{"id": template, "params": {...}}`, stored beside it; the API renders that with
`render()` in the request's language (`django.middleware.locale.LocaleMiddleware`, from Accept-Language).

The template is the gettext msgid (fleet/locale/<lang>/LC_MESSAGES/django.po). A parameter may itself be a `Msg`
(the cause's summary inside a headline) or a `Join` of texts; both are rendered in the same language. A
translation whose placeholders do not format falls back to the English template, never to an error.
Texts an operator typed (notes, overrides) are never wrapped: they are not message ids.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils import translation

_FORMATTER = string.Formatter()


def placeholders(template: str) -> set[str]:
    """The named fields of a str.format template ("{gpu}", "{pct:.1f}" → {"gpu", "pct"}); ValueError if malformed."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in _FORMATTER.parse(template) if name is not None}


class Msg:
    """A message id (an English str.format template) with named parameters."""

    __slots__ = ("cap", "id", "params")

    def __init__(self, id: str, /, **params: Any) -> None:  # noqa: A002 - the gettext term
        self.id = id
        self.params = params
        self.cap = False

    def capitalised(self) -> Msg:
        """The same message with its first letter upper-case once rendered (the start of a sentence)."""
        copy = Msg(self.id, **self.params)
        copy.cap = True
        return copy

    @classmethod
    def known(cls, text: str, /, **params: Any) -> Msg:
        """A message whose id is not a literal at the call site but is checked elsewhere (a rule definition's
        title or remedy, a seeded Xid meaning: the catalogue test walks those). Text without a translation simply
        renders as itself, so an operator-edited text stays as typed."""
        return cls(text, **params)

    def __str__(self) -> str:
        return _cap(_format(self.id, {k: _english(v) for k, v in self.params.items()}, self.id), self.cap)

    def __repr__(self) -> str:
        return f"Msg({self.id!r}, **{self.params!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Msg) and (self.id, self.params) == (other.id, other.params)

    def __hash__(self) -> int:
        return hash(self.id)

    def as_json(self) -> dict:
        data = {"id": self.id, "params": {k: _jsonable(v) for k, v in self.params.items()}}
        if self.cap:
            data["cap"] = True
        return data


# Separators a `Join` translates (Chinese writes "；" and "、"); any other string separator stays as it is.
SEPARATORS = ("; ", ", ")


class Join:
    """Texts joined by a separator ("; ", ", " or a message such as `Msg(" and ")`), each rendered in the
    reader's language."""

    __slots__ = ("items", "sep")

    def __init__(self, items: list | tuple, sep: str | Msg = "; ") -> None:
        self.items = list(items)
        self.sep = Msg.known(sep) if sep in SEPARATORS else sep

    def __str__(self) -> str:
        return str(_english(self.sep)).join(str(_english(item)) for item in self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def as_json(self) -> dict:
        return {"join": _jsonable(self.sep), "items": [_jsonable(item) for item in self.items]}


def text(value: Any) -> str:
    """English text of a str, Msg or Join (what the plain-text columns store)."""
    return str(_english(value))


def as_json(value: Any) -> dict | None:
    """The stored form of a message: {"id", "params"}; a plain str becomes a message without parameters only if
    it is not empty (then it renders through gettext too: rule remedies are definition texts)."""
    if isinstance(value, Msg | Join):
        return _jsonable(value) if isinstance(value, Msg) else Msg("{text}", text=value).as_json()
    if isinstance(value, str) and value:
        return Msg.known(value).as_json()
    return None


def in_server_language(func: Callable) -> Callable:
    """Run `func` in the server's LANGUAGE_CODE whatever the request asked for: what it writes is stored or sent
    (tickets, webhooks, incident evidence), not shown to the reader of this request."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with translation.override(settings.LANGUAGE_CODE):
            return func(*args, **kwargs)

    return wrapper


def render(data: Any, language: str | None = None, fallback: str = "") -> str:
    """A stored message ({"id","params"}, a Msg, a Join or plain text) in `language` (default: the active one).

    `fallback` is returned when there is no message (an old row without one: its English column)."""
    if language is not None:
        with translation.override(language):
            return render(data, fallback=fallback)
    if data is None or data == {}:
        return fallback
    return str(_render(data))


def _render(value: Any) -> str:
    if isinstance(value, Msg | Join):
        value = value.as_json()
    if isinstance(value, dict) and "id" in value:
        template = str(value["id"])
        params = value.get("params") or {}
        rendered = {k: _render(v) for k, v in params.items()} if isinstance(params, dict) else {}
        translated = translation.gettext(template) if template else template
        return _cap(_format(translated, rendered, template), bool(value.get("cap")))
    if isinstance(value, dict) and "join" in value:
        return str(_render(value["join"])).join(str(_render(item)) for item in value.get("items") or [])
    return _english(value)


def _format(template: str, params: dict, english: str) -> str:
    for candidate in (template, english):
        try:
            return candidate.format(**params)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError):
            continue
    return english


def _cap(value: str, cap: bool) -> str:
    return value[:1].upper() + value[1:] if cap else value


def _english(value: Any) -> str:
    if isinstance(value, Msg | Join):
        return str(value)
    if isinstance(value, dict) and ("id" in value or "join" in value):
        with translation.override("en"):
            return _render(value)
    return value if isinstance(value, str) else _raw(value)


def _raw(value: Any):
    """Numbers keep their type so that "{pct:.1f}" formats them; everything else is its str."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def _jsonable(value: Any):
    if isinstance(value, Msg | Join):
        return value.as_json()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict) and ("id" in value or "join" in value):
        return value  # already a stored message
    return str(value)
