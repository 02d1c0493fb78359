"""Checkpoint freshness collector."""

from __future__ import annotations

import os

from fleet_agent.collectors.checkpoint import CheckpointCollector


def _file(path, mtime):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    os.utime(path, (mtime, mtime))
    return path


def test_newest_file_anywhere_below_the_configured_dirs(tmp_path):
    now = 1_800_000_000.0
    _file(tmp_path / "a" / "step-100.pt", now - 3600)
    newest = _file(tmp_path / "a" / "run1" / "deep" / "step-200.pt", now - 120)
    _file(tmp_path / "b" / "step-050.pt", now - 7200)
    result = CheckpointCollector([tmp_path / "a", tmp_path / "b"], clock=lambda: now).collect()
    assert result == {
        "dirs": [str(tmp_path / "a"), str(tmp_path / "b")],
        "newest_path": str(newest),
        "newest_age_s": 120.0,
    }


def test_no_dirs_configured_is_null_and_empty_or_missing_dirs_have_no_newest(tmp_path):
    assert CheckpointCollector([]).collect() is None
    (tmp_path / "empty").mkdir()
    result = CheckpointCollector([tmp_path / "empty", tmp_path / "missing"]).collect()
    assert result["newest_path"] is None and result["newest_age_s"] is None


def test_age_grows_between_rescans_and_a_rescan_finds_new_files(tmp_path):
    clock = [1_800_000_000.0]
    _file(tmp_path / "old.pt", clock[0] - 100)
    collector = CheckpointCollector([tmp_path], rescan_s=60, clock=lambda: clock[0])
    assert collector.collect()["newest_age_s"] == 100.0
    _file(tmp_path / "new.pt", clock[0] + 10)
    clock[0] += 30
    assert collector.collect()["newest_age_s"] == 130.0  # cached scan, age recomputed
    clock[0] += 30
    assert collector.collect()["newest_path"].endswith("new.pt")


def test_scan_is_bounded(tmp_path):
    for i in range(50):
        _file(tmp_path / f"f{i:02d}", 1_000_000 + i)
    result = CheckpointCollector([tmp_path], max_entries=10, clock=lambda: 2_000_000).collect()
    assert result["newest_path"] is not None  # found something without walking everything


def test_future_mtime_is_not_a_negative_age(tmp_path):
    _file(tmp_path / "x.pt", 2_000_000_100)
    assert CheckpointCollector([tmp_path], clock=lambda: 2_000_000_000).collect()["newest_age_s"] == 0.0
