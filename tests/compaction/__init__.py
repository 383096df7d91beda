"""Summarizers: Gemini through google-genai against a local fake, extractive, the factory."""
