"""Logging helpers for collectors that run every few seconds forever.

A broken /proc file or an unsupported NVML field stays broken: warning on every cycle would bury
the one line that matters, so each distinct problem is logged once per collector instance.
"""

from __future__ import annotations

import logging
import threading


class WarnOnce:
    def __init__(self, logger: logging.Logger, limit: int = 256):
        self._logger = logger
        self._seen: set[str] = set()
        self._limit = limit  # keeps memory bounded if keys are unexpectedly unique
        self._lock = threading.Lock()

    def __call__(self, key: str, message: str, *args: object) -> None:
        with self._lock:
            if key in self._seen or len(self._seen) >= self._limit:
                return
            self._seen.add(key)
        self._logger.warning(message, *args)

    def forget(self, key: str) -> None:
        """Log ``key`` again the next time it happens (the condition cleared in between)."""
        with self._lock:
            self._seen.discard(key)
