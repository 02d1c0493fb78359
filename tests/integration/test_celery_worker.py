import pytest

from fleet.core.tasks import ping

pytestmark = pytest.mark.integration


def test_real_worker_round_trip(celery_worker):
    result = ping.delay()
    assert result.get(timeout=30) == "pong"
    assert "core.ping" in celery_worker.log_path.read_text()
