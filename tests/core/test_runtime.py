import gc

import pytest

from fleet.core.runtime import cyclic_gc_paused


@pytest.fixture
def collector_restored():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_off_inside_and_back_on_after_even_on_error(collector_restored):
    gc.enable()
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("the batch failed")
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled(collector_restored):
    gc.disable()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


@pytest.mark.django_db
def test_the_health_cycle_and_the_writer_batch_run_with_it_paused(collector_restored, monkeypatch):
    """Both bulk paths hold it off (the measured 30-40 % of their CPU); the state is read inside each."""
    from fleet.health.services import evaluation
    from fleet.telemetry.services import writer

    seen = {}

    def cycle(**kwargs):
        seen["cycle"] = gc.isenabled()
        return evaluation.EvaluationResult()

    def handle(self, messages):
        seen["batch"] = gc.isenabled()
        return len(messages)

    monkeypatch.setattr(evaluation, "_cycle_run", cycle)
    monkeypatch.setattr(evaluation, "cycle_lock_acquire", lambda **kwargs: True)
    monkeypatch.setattr(writer.Writer, "_handle", handle)
    monkeypatch.setattr(writer.Writer, "read", lambda self: [("1-0", {})])
    gc.enable()
    evaluation.evaluate(node_ids=[1])
    writer.Writer.__new__(writer.Writer).step()
    assert seen == {"cycle": False, "batch": False} and gc.isenabled()
