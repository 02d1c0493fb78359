import os
import uuid

import pytest
from django.test import override_settings

from fleet.core import ratelimit

LOCMEM = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ratelimit-test"}}
REDIS = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                     "LOCATION": os.environ.get("REDIS_URL", "")}}


@pytest.mark.parametrize("caches", [
    pytest.param(LOCMEM, id="locmem"),
    pytest.param(REDIS, id="redis", marks=pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="no REDIS_URL")),
])
def test_counts_per_key_within_the_window(caches, monkeypatch):
    now = [1_000_040.0]  # 20 s into a 60-s window
    monkeypatch.setattr(ratelimit.time, "time", lambda: now[0])
    key = f"test:{uuid.uuid4().hex}"
    with override_settings(CACHES=caches):
        assert [ratelimit.hit(key, 60) for _ in range(3)] == [1, 2, 3]
        assert ratelimit.hit(key + "-other", 60) == 1
        assert ratelimit.seconds_left(60) == pytest.approx(40.0)
        now[0] += 40.0  # the next window starts from zero
        assert ratelimit.hit(key, 60) == 1


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="no REDIS_URL")
def test_redis_window_key_expires():
    from django.core.cache import caches

    key = f"test:{uuid.uuid4().hex}"
    with override_settings(CACHES=REDIS):
        ratelimit.hit(key, 60)
        backend = caches["default"]
        name = backend.make_and_validate_key(f"ratelimit:{key}:{int(ratelimit.time.time() // 60)}")
        ttl = backend._cache.get_client(name).ttl(name)
        assert 0 < ttl <= 61
