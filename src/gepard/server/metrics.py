"""Prometheus metrics of one server (own registry, so several apps in one process do not collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("gepard_requests", "Requests by endpoint and status", ["endpoint", "status"],
                                registry=self.registry)
        self.ttfa = Histogram("gepard_ttfa_seconds", "Time to first audio", registry=self.registry,
                              buckets=(0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5))
        self.rtf = Histogram("gepard_rtf", "Generation time / audio duration", registry=self.registry,
                             buckets=(0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2))
        self.active = Gauge("gepard_active_streams", "Streams generating now", registry=self.registry)
        self.queued = Gauge("gepard_queue_depth", "Requests waiting for a stream", registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
