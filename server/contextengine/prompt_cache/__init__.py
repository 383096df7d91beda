"""Prompt caching at the edges: reading a BuildContext request's system instruction, tools and
tool config (validated as google-genai types), and managed Gemini caches through google-genai.
The decisions themselves are pure (``contextengine.core.prompt_cache``)."""
