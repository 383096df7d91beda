"""The garbage collector's policy (``process.gc_policy``), in this process: a full collection's
survivors are frozen, a cycle that formed among frozen objects is freed once they are thawed,
pauses are measured with or without freezing. Every test leaves the collector as it found it
(nothing frozen, the callback removed)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from contextengine.observability.metrics import GcCollector
from contextengine.process.gc_policy import PAUSE_BUCKETS, GcPolicy
from contextengine.settings import ServerSettings

pytestmark = pytest.mark.unit


class Node:
    """A tracked object that can point at itself (a cycle only the collector frees)."""

    def __init__(self) -> None:
        self.other: Node | None = None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    assert gc.get_freeze_count() == 0
    callbacks = list(gc.callbacks)
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks
        gc.unfreeze()


def test_the_survivors_of_a_full_collection_are_frozen() -> None:
    # Other threads of the test process may allocate and collect meanwhile: the counts are
    # lower bounds.
    policy = GcPolicy()
    policy.install()
    kept = [Node() for _ in range(100)]
    gc.collect(0)
    assert policy.freezes == 0  # a young collection freezes nothing
    assert policy.stats[0].collections >= 1
    gc.collect()
    assert policy.freezes >= 1
    assert gc.get_freeze_count() >= len(kept)
    full = policy.stats[2]
    assert full.collections >= 1
    assert full.pause_seconds > 0
    assert full.buckets[-1] <= full.collections
    # Out of the collector's sight: a full collection no longer traverses them.
    tracked = {id(o) for o in gc.get_objects()}
    assert not any(id(node) in tracked for node in kept)


def test_a_cycle_formed_among_frozen_objects_is_freed_after_a_thaw() -> None:
    clock = Clock()
    policy = GcPolicy(thaw_seconds=10.0, clock=clock)
    policy.install()
    node = Node()
    node.other = node
    alive = weakref.ref(node)
    gc.collect()  # frozen while alive
    del node
    gc.collect()
    assert alive() is not None  # out of the collector's sight
    clock.now = 10.0
    gc.collect()  # ends with the thaw
    assert policy.thaws == 1
    gc.collect()  # sees everything again, then freezes again
    assert alive() is None
    assert policy.thaws == 1  # not again before another 10 s
    assert gc.get_freeze_count() > 0


def test_without_freeze_pauses_are_measured_and_nothing_is_frozen() -> None:
    policy = GcPolicy(freeze=False)
    policy.install()
    gc.collect()
    gc.collect(1)
    assert gc.get_freeze_count() == 0
    assert policy.freezes == 0
    assert policy.stats[1].collections >= 1
    assert policy.stats[2].collections >= 1


def test_uninstall_stops_measuring_and_freezing() -> None:
    policy = GcPolicy()
    policy.install()
    policy.install()  # once only
    assert gc.callbacks.count(policy._callback) == 1
    policy.uninstall()
    gc.collect()
    assert policy.stats[2].collections == 0
    assert gc.get_freeze_count() == 0
    policy.uninstall()  # idempotent


def test_thaw_seconds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="thaw_seconds"):
        GcPolicy(thaw_seconds=0)


def test_the_metrics_are_a_well_formed_histogram() -> None:
    policy = GcPolicy(freeze=False)
    policy.stats[2].add(0.003)
    policy.stats[2].add(0.7)
    policy.stats[2].add(9.0)  # beyond the last bound: +Inf only
    registry = CollectorRegistry()
    registry.register(GcCollector(policy))
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    full = (("generation", "2"),)
    assert samples[("contextengine_gc_pause_seconds_count", full)] == 3
    assert samples[("contextengine_gc_pause_seconds_sum", full)] == pytest.approx(9.703)
    assert samples[("contextengine_gc_pause_seconds_bucket", (*full, ("le", "0.0025")))] == 0
    assert samples[("contextengine_gc_pause_seconds_bucket", (*full, ("le", "0.005")))] == 1
    assert samples[("contextengine_gc_pause_seconds_bucket", (*full, ("le", "1.0")))] == 2
    assert samples[("contextengine_gc_pause_seconds_bucket", (*full, ("le", "5.0")))] == 2
    assert samples[("contextengine_gc_pause_seconds_bucket", (*full, ("le", "+Inf")))] == 3
    assert samples[("contextengine_gc_pause_seconds_count", (("generation", "0"),))] == 0
    assert samples[("contextengine_gc_frozen_objects", ())] == gc.get_freeze_count()
    assert samples[("contextengine_gc_thaws_total", ())] == 0
    # one bucket per bound, +Inf besides
    buckets = [n for n, _ in samples if n == "contextengine_gc_pause_seconds_bucket"]
    assert len(buckets) == len(policy.stats) * (len(PAUSE_BUCKETS) + 1)


def test_the_sidecar_freezes_by_default() -> None:
    settings = ServerSettings()
    assert settings.gc_freeze is True
    assert settings.gc_thaw_seconds == 3600.0
