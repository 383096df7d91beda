"""The gRPC edge: servicers that translate messages and map errors, and nothing else.

``generic_handler`` (the shared handler wrapper: size limit, error mapping, logging) is what
the transport (``contextengine.transport``) registers the servicers with.
"""

from __future__ import annotations

from contextengine.service._handlers import generic_handler
from contextengine.service._observe import Metadata, RpcCall, RpcObserver

__all__ = ["Metadata", "RpcCall", "RpcObserver", "generic_handler"]
