"""The texts a rendering adds to the conversation, in this project's words.

google-adk's model classes add a user turn when the contents end with the model's (so that the
model continues), one when there are no contents, and a placeholder result for a call whose
result never came. A rendering adds the same turns; their wording is configuration (the app's
``RenderingConfig``), this project's by default: the parity tests configure google-adk's own
words, read from the installed package, and get google-adk's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_TEXTS", "RenderTexts"]


@dataclass(frozen=True)
class RenderTexts:
    """The wording of the turns a rendering adds."""

    #: the user turn after contents that end with the model's
    continue_text: str = (
        "Go on with what was asked, as your instructions say; if nothing is left to do, stop or "
        "sum up."
    )
    #: the user turn when there is nothing else to send, or no user turn with anything in it
    empty_text: str = "Follow your system instruction."
    #: the result sent for a call whose result was never recorded
    missing_tool_result: str = (
        "No result was recorded for this call: it may have been cut off before it finished."
    )


DEFAULT_TEXTS = RenderTexts()
