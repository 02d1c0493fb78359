"""Checkpoint freshness: how old is the newest file under the configured checkpoint directories.

A training job that stopped checkpointing loses hours on the next preemption or Xid, so the age
matters more than the exact file. The walk is bounded (entries and depth) and its result is
reused for ``rescan_s`` seconds; the age itself is recomputed on every call.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from fleet_agent.logutil import WarnOnce

log = logging.getLogger(__name__)

MAX_ENTRIES = 20_000
MAX_DEPTH = 8


class CheckpointCollector:
    def __init__(
        self,
        dirs: Iterable[str | Path],
        *,
        rescan_s: float = 60.0,
        max_entries: int = MAX_ENTRIES,
        max_depth: int = MAX_DEPTH,
        clock: Callable[[], float] = time.time,
    ):
        self.dirs = [str(d) for d in dirs]
        self.rescan_s = rescan_s
        self.max_entries = max_entries
        self.max_depth = max_depth
        self._clock = clock
        self._newest: tuple[float, str] | None = None
        self._scanned_at: float | None = None
        self._warn = WarnOnce(log)

    def collect(self) -> dict | None:
        """``None`` when no directory is configured, else dirs, newest_path and newest_age_s."""
        if not self.dirs:
            return None
        now = self._clock()
        if self._scanned_at is None or now - self._scanned_at >= self.rescan_s:
            self._newest = self._scan()
            self._scanned_at = now
        if self._newest is None:
            return {"dirs": self.dirs, "newest_path": None, "newest_age_s": None}
        mtime, path = self._newest
        # A clock that moved backwards (or a file from the future) is not a negative age.
        return {
            "dirs": self.dirs,
            "newest_path": path[:1024],
            "newest_age_s": round(max(0.0, now - mtime), 1),
        }

    def _scan(self) -> tuple[float, str] | None:
        newest: tuple[float, str] | None = None
        budget = self.max_entries
        stack: list[tuple[str, int]] = []
        for directory in self.dirs:
            if os.path.isdir(directory):
                stack.append((directory, 0))
            else:
                self._warn(f"missing:{directory}", "checkpoint directory %s does not exist", directory)
        while stack and budget > 0:
            directory, depth = stack.pop()
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        budget -= 1
                        if budget <= 0:
                            self._warn("budget", "checkpoint scan stopped after %d entries", self.max_entries)
                            break
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                if depth + 1 < self.max_depth:
                                    stack.append((entry.path, depth + 1))
                            elif entry.is_file():
                                mtime = entry.stat().st_mtime
                                if newest is None or mtime > newest[0]:
                                    newest = (mtime, entry.path)
                        except OSError:
                            continue  # vanished while we looked (old checkpoints get pruned)
            except OSError as err:
                self._warn(f"scan:{directory}", "cannot scan checkpoint directory %s: %s", directory, err)
        return newest
