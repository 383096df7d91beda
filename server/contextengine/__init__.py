"""contextengine: a context engine for AI agents, served as a gRPC sidecar."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
