"""Maintenance windows: weekly intervals (in a time zone) during which a pool's disruptive steps may run."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_TIME = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
WINDOW_KEYS = {"days", "start", "duration_minutes", "timezone"}


def windows_clean(value) -> tuple[list[dict], dict[str, list[str]]]:
    """Validate a list of windows; errors are keyed by path (`[0].start`)."""
    errors: dict[str, list[str]] = {}
    if not isinstance(value, list):
        return [], {"": ["Expected a list of windows."]}
    if len(value) > 20:
        return [], {"": ["At most 20 windows."]}
    cleaned = []
    for i, window in enumerate(value):
        path = f"[{i}]"
        if not isinstance(window, dict):
            errors[path] = ["Expected an object with days, start, duration_minutes, timezone."]
            continue
        unknown = sorted(set(window) - WINDOW_KEYS)
        if unknown:
            errors[f"{path}.{unknown[0]}"] = [f"Unknown key; allowed: {', '.join(sorted(WINDOW_KEYS))}."]
        days = window.get("days", [])
        if not isinstance(days, list) or any(d not in DAYS for d in days):
            errors[f"{path}.days"] = [f"A list of {', '.join(DAYS)} (empty = every day)."]
        start = window.get("start")
        if not isinstance(start, str) or not _TIME.match(start):
            errors[f"{path}.start"] = ["A time as HH:MM (24 h)."]
        duration = window.get("duration_minutes")
        if not isinstance(duration, int) or isinstance(duration, bool) or not 1 <= duration <= 7 * 24 * 60:
            errors[f"{path}.duration_minutes"] = ["Minutes between 1 and 10080."]
        tz = window.get("timezone", "UTC")
        if not _valid_zone(tz):
            errors[f"{path}.timezone"] = ["An IANA time zone such as UTC or Asia/Shanghai."]
        cleaned.append({"days": days, "start": start, "duration_minutes": duration, "timezone": tz})
    return cleaned, errors


def _valid_zone(name) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _intervals(window: dict, now: datetime):
    tz = ZoneInfo(window.get("timezone") or "UTC")
    hour, minute = (int(x) for x in window["start"].split(":"))
    local = now.astimezone(tz)
    days = set(window.get("days") or DAYS)
    for offset in range(-8, 9):
        day = (local + timedelta(days=offset)).date()
        if DAYS[day.weekday()] not in days:
            continue
        start = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
        yield start, start + timedelta(minutes=window["duration_minutes"])


def window_status(windows: list[dict], now: datetime) -> tuple[bool, datetime | None]:
    """(open now, when the next window opens). No windows configured = always open."""
    if not windows:
        return True, None
    upcoming = []
    for window in windows:
        for start, end in _intervals(window, now):
            if start <= now < end:
                return True, None
            if start > now:
                upcoming.append(start)
    return False, min(upcoming) if upcoming else None
