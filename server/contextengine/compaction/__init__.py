"""Compaction at run time: the per-session scheduler and the summarizers.

The pure rules (which range, which summary event) live in ``contextengine.core.compaction``;
this package calls summarizers, appends summary events and keeps compaction off the request path.
"""
