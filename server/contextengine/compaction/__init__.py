"""Compaction at run time, split by job: ``compactor`` (the facade the engine uses),
``scheduler`` (background post-invocation passes, single flight), ``token_check`` (the check
before a context), ``runner`` (plan, review, summarise, guarded append), ``guarded_append``,
``sessions`` (per-session state, locks, backoff, status), ``planning``, ``summarizer_pool``,
``types``, and the summarizers (``summarizers/``).

The pure rules (which range, which summary event) live in ``contextengine.core.compaction``;
this package calls summarizers, appends summary events and keeps compaction off the request path.
The configuration in effect comes from ``contextengine.runtime.resolver.ConfigResolver``.
"""
