"""Live subscriptions: fan-out of committed changes to bounded per-subscriber buffers (the
broadcaster) and the pure rules that decide what a subscriber receives."""

from __future__ import annotations
