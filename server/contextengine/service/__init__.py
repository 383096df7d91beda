"""The gRPC edge: servicers that translate messages and map errors, and nothing else."""

from __future__ import annotations
