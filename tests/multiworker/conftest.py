"""Fixtures of the multi-worker tests: ``two_hosts`` (two network namespaces joined by a veth pair)."""

from tests.multiworker.netns import two_hosts  # noqa: F401
