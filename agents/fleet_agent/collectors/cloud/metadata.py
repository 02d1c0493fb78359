"""What every cloud module shares: the metadata-service HTTP client, answer parsing, and the base class.

The metadata service is link-local and spoken to with ``http.client`` directly, so that proxy settings
in the environment never apply. Every request has a short timeout; an unreachable service is a debug
line and ``None``; a malformed answer is one warning per topic (notices are polled every few seconds),
then debug lines until it is well-formed again.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import ClassVar, NamedTuple
from urllib.parse import urlsplit

from fleet_agent.timeutil import rfc3339

log = logging.getLogger(__name__)

# (kind, deadline, source, detail): the deadline is RFC 3339, None (not given), or a timedelta counted
# from when the notice was first seen (GCP announces a fixed notice period, not a time).
Notice = tuple[str, "str | timedelta | None", str, dict]


class Response(NamedTuple):
    status: int
    body: bytes

    def text(self) -> str | None:
        return self.body.decode("utf-8", "replace").strip() if self.status == 200 else None


def text(response: Response | None) -> str | None:
    """The body of a 200 answer, stripped; None for no answer, another status or an empty body."""
    return (response.text() or None) if response is not None else None


def parse_time(value: str | None, naive_tz: timezone = UTC) -> str | None:
    """ISO 8601 / RFC 3339 / "YYYY-MM-DD HH:MM:SS" / RFC 1123 → RFC 3339 UTC, or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=naive_tz)
    return rfc3339(moment)


def spot_from_text(value: str | None, spot_values: tuple[str, ...], other_values: tuple[str, ...]) -> bool | None:
    """True for a spot answer, False for another known one, None when absent or unknown."""
    answer = value.strip().upper() if value is not None else None
    return True if answer in spot_values else False if answer in other_values else None


class MetadataService:
    """One cloud's metadata service at ``base_url``."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self._warned: set[str] = set()

    def request(self, method: str, path: str, headers: dict | None = None,
                body: bytes | None = None) -> Response | None:
        """One request; None when the service cannot be reached in time."""
        url = urlsplit(self.base_url)
        connection_class = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        connection = connection_class(url.hostname or "", url.port, timeout=self.timeout)
        try:
            connection.request(method, url.path + path, body=body, headers=headers or {})
            response = connection.getresponse()
            return Response(response.status, response.read(1024 * 1024))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            log.debug("metadata %s %s unreachable: %s", method, path, exc)
            return None
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def warn(self, topic: str, message: str, *args) -> None:
        # Notices are polled every few seconds: say it once, then keep quiet.
        if topic in self._warned:
            log.debug(message, *args)
        else:
            self._warned.add(topic)
            log.warning(message, *args)

    def json(self, topic: str, response: Response | None) -> dict | None:
        """The JSON object of a 200 answer; None (and a warning, once) for anything else."""
        if response is None or response.status != 200:
            return None
        try:
            payload = json.loads(response.body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            self.warn(topic, "malformed %s metadata response %r; ignoring it", topic, response.body[:200])
            return None
        self._warned.discard(topic)
        return payload


class CloudBackend:
    """One cloud: how DMI shows it, and how its metadata service gives identity and notices.

    A subclass per cloud module, registered by name in ``registry.CLOUDS``; ``CloudCollector`` holds one
    instance (its per-cloud state: tokens, the VM's name) for as long as it lives.
    """

    name: ClassVar[str]
    default_metadata_url: ClassVar[str]
    dmi_prefixes: ClassVar[dict[str, str]] = {}  # DMI field -> how this cloud's value starts (any one will do)

    def __init__(self, service: MetadataService) -> None:
        self.service = service

    @classmethod
    def detect(cls, dmi: dict[str, str]) -> bool:
        """Whether these DMI strings (``read_dmi``) are this cloud's."""
        return any(dmi[field].startswith(prefix) for field, prefix in cls.dmi_prefixes.items())

    @classmethod
    def is_bare_metal(cls, dmi: dict[str, str], instance_type: str | None) -> bool:
        return False

    def identity(self) -> dict | None:
        """instance_id, instance_type, region, spot; None when the metadata service has no answer."""
        raise NotImplementedError

    def notices(self) -> list[Notice]:
        """Every interruption notice the metadata service shows now (the collector picks the most urgent)."""
        raise NotImplementedError

    def notice_key(self, source: str, detail: dict) -> str | None:
        """What identifies one notice across polls when its detail changes meanwhile (None: the detail)."""
        return None

    def acknowledge(self, event_id: str) -> bool:
        """Tell the platform to go ahead with a notified event now; False where the cloud has no such call."""
        return False


class PlainMetadataCloud(CloudBackend):
    """Clouds whose metadata service copies EC2's plain ``/latest/meta-data/`` layout without tokens
    (Alibaba, Tencent): the same identity reads, and a spot termination time at a path of their own."""

    region_path: ClassVar[str]
    termination_path: ClassVar[str]
    termination_tz: ClassVar[timezone]  # for a time printed without a zone

    @property
    def termination_source(self) -> str:
        return f"{self.name}.spot.termination-time"

    def _get(self, path: str) -> Response | None:
        return self.service.request("GET", f"/latest/meta-data/{path}")

    def identity(self) -> dict | None:
        instance_id = text(self._get("instance-id"))
        if instance_id is None:
            return None
        return {"instance_id": instance_id, "instance_type": text(self._get("instance/instance-type")),
                "region": text(self._get(self.region_path)), "spot": None}

    def notices(self) -> list[Notice]:
        value = text(self._get(self.termination_path))
        if not value:
            return []
        deadline = parse_time(value, self.termination_tz)
        if deadline is None:
            self.service.warn(self.termination_source, "malformed %s %r; ignoring it", self.termination_source,
                              value[:200])
            return []
        return [("terminate", deadline, self.termination_source, {"termination-time": value})]
