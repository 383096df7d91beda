"""Summarizers: what turns a compacted range into summary text (extractive, Gemini), and the
factory that builds one from an app's configuration."""

from __future__ import annotations
