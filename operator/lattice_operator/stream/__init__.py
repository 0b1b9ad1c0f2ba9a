"""The real-time stream: what changes in the cluster, as the design's event envelope, to
subscribers allowed to see it (Server-Sent Events, a live page, `lattice watch`)."""

from lattice_operator.stream.envelope import EventKind, StreamEvent, Subject
from lattice_operator.stream.hub import EventHub, Subscription

__all__ = ["EventHub", "EventKind", "StreamEvent", "Subject", "Subscription"]
