"""How the session briefing is listed: the prompt `brief`, the resource `octobrain://brief`
and its template, whose query holds what `resources/read` takes (`scope` only where the
session is not locked to a project)."""

from __future__ import annotations

import mcp_types as types

BRIEF_URI = "octobrain://brief"
_WHAT = (
    "Preferences, project truths, goals and recent memories for this session's scope, within "
    "a token budget (Markdown)"
)
BRIEF_NAME = "brief"
_SCOPE_ARGUMENT = types.PromptArgument(
    name="scope",
    description="Project scope, left out for global (only when the session is not locked to a "
    "project)",
    required=False,
)
_BUDGET_ARGUMENT = types.PromptArgument(
    name="max_tokens", description="Token budget (default 1500)", required=False
)


def brief_prompt(locked: bool | None) -> types.Prompt:
    """The prompt `brief`: its arguments `max_tokens` in a locked session, `scope` too in an
    unlocked one, or where each call may be locked by the roots sent with it (None)."""
    return types.Prompt(
        name=BRIEF_NAME,
        title="Session briefing",
        description="What octobrain remembers that matters now: how the user likes to work, "
        "what is true about this project, goals, and recent memories that still matter",
        arguments=[_BUDGET_ARGUMENT] if locked else [_SCOPE_ARGUMENT, _BUDGET_ARGUMENT],
    )


BRIEF_RESOURCE = types.Resource(
    uri=BRIEF_URI,
    name="brief",
    title="Session briefing",
    description=f"{_WHAT}; the global scope's where the session is not locked to a project",
    mime_type="text/markdown",
)


def brief_template(locked: bool | None) -> types.ResourceTemplate:
    """`octobrain://brief{?max_tokens}` in a locked session; `{?scope,max_tokens}` in an
    unlocked one, or where each call may be locked by the roots sent with it (None)."""
    if locked:
        query, scope = "{?max_tokens}", ""
    else:
        query = "{?scope,max_tokens}"
        scope = (
            " scope: a project scope, or empty or left out for global (not in a locked session);"
        )
    return types.ResourceTemplate(
        uri_template=BRIEF_URI + query,
        name="brief",
        title="Session briefing",
        description=f"{_WHAT}.{scope} max_tokens: the token budget (default 1500)",
        mime_type="text/markdown",
    )
