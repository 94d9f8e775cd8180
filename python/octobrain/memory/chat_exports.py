"""The conversations of a product's data export: Claude.ai's and ChatGPT's `conversations.json`,
a list of whole conversations with their turns inside.

Each conversation is one `Conversation` stored under its own id (Claude.ai's `uuid`,
ChatGPT's `conversation_id` or `id`), each turn under its message's id, so a later export of
the same account ingested again adds only what was said since; its title (`name`, `title`)
goes with its turns, shown and indexed, not in what keys them. Only what the user and the
assistant said is read: ChatGPT's system, tool and hidden messages, its tool calls, Claude.ai's
tool and thinking blocks, and messages left empty are skipped. ChatGPT keeps every regenerated
answer and edited question in a tree; the branch read is the one the user kept, from
`current_node` back to the root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from octobrain.errors import InvalidInput, as_json
from octobrain.memory.chat_keys import parts_text
from octobrain.memory.conversation_formats import EXPORTS
from octobrain.memory.turn_fields import same_id, turn_id, turn_name, turn_text, turn_time
from octobrain.memory.turns import Conversation, Turn, collected, in_parts

__all__ = ["EXPORTS", "conversation_title", "export_conversations", "export_of"]

_SPEAKERS = {"human": "user", "user": "user", "assistant": "assistant"}  # (as Claude Code's)


def export_of(record: dict[Any, Any]) -> str | None:
    """Which product's export `record` is a conversation of, else None."""
    if "chat_messages" in record:
        return "claude-ai"
    if "mapping" in record:
        return "chatgpt"
    return None


def export_conversations(
    fmt: str,
    conversations: Iterable[tuple[str, Any]],
    once: Callable[[Conversation], Conversation],
) -> list[Conversation]:
    """The conversations of an export in format `fmt` (one of `EXPORTS`), each given with how
    errors name it (`file[3]`); `once` drops a turn repeated (`conversation.once`)."""
    read = _claude_ai if fmt == "claude-ai" else _chatgpt
    title_key = _KEYS[fmt][3]
    out = []
    for where, record in conversations:
        if not isinstance(record, dict):
            raise InvalidInput(where, f"must be a conversation object of a {fmt} export")
        key, messages = read(where, record)
        title = conversation_title(f"{where}.{title_key}", record.get(title_key))
        out.append(in_parts(once(collected(key, _turns(messages, _KEYS[fmt]), title))))
    return out


def conversation_title(field_name: str, value: object) -> str:
    """A conversation's title as the product shows it, "" when it has none, cut to
    `TITLE_CHARS` characters (a turn's title holds it beside its speaker and date)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    name = turn_name(field_name, value, None)
    return name if len(name) <= TITLE_CHARS else name[: TITLE_CHARS - 1].rstrip() + "…"


# A message as both exports are read: where it is, its id, who said it, its text, its time.
_Message = tuple[str, object, str, object, object]
# The keys a format writes a message's id, text and time, and a conversation's title, under.
_KEYS = {
    "claude-ai": ("uuid", "text", "created_at", "name"),
    "chatgpt": ("id", "content", "create_time", "title"),
}
TITLE_CHARS = 100


def _turns(messages: Iterable[_Message], keys: tuple[str, ...]) -> Iterator[Turn | None]:
    id_key, text_key, time_key, _ = keys
    for where, given_id, speaker, raw, stamp in messages:
        text = turn_text(f"{where}.{text_key}", raw).strip()
        if not text:
            yield None
            continue
        moment = turn_time(f"{where}.{time_key}", stamp)
        own, former = same_id(turn_id(f"{where}.{id_key}", given_id))
        if not own:
            raise InvalidInput(
                f"{where}.{id_key}", "is missing; an exported message is keyed by it"
            )
        yield Turn(
            speaker,
            text,
            "1",
            own,
            moment,
            f"{moment:%d %B %Y}" if moment else "",
            f"{where}.{id_key}",
            former,
        )


def _conversation_key(where: str, record: dict[Any, Any], *names: str) -> str:
    for name in names:
        key = turn_id(f"{where}.{name}", record.get(name))
        if key:
            return key
    raise InvalidInput(
        f"{where}.{names[0]}", "is missing; an exported conversation is stored under its id"
    )


def _claude_ai(where: str, record: dict[Any, Any]) -> tuple[str, Iterator[_Message]]:
    """A Claude.ai conversation: `{uuid, name, created_at, chat_messages: [{uuid, sender,
    text, content: [{type, text}], created_at}]}`."""
    key = _conversation_key(where, record, "uuid")
    messages = record.get("chat_messages")
    if not isinstance(messages, list):
        raise InvalidInput(f"{where}.chat_messages", "must be a list of messages")
    return key, _claude_ai_messages(f"{where}.chat_messages", messages)


def _claude_ai_messages(where: str, messages: list[Any]) -> Iterator[_Message]:
    for i, message in enumerate(messages):
        at = f"{where}[{i}]"
        if not isinstance(message, dict):
            raise InvalidInput(at, "must be a message object")
        speaker = _SPEAKERS.get(str(message.get("sender")))
        if speaker is None:
            continue
        content = message.get("content")
        if isinstance(content, list) and content:  # (text blocks; tools, thinking left out)
            blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
            text: object = parts_text(f"{at}.content", blocks)
        else:
            text = message.get("text", "")
        yield at, message.get("uuid"), speaker, text, message.get("created_at")


def _chatgpt(where: str, record: dict[Any, Any]) -> tuple[str, Iterator[_Message]]:
    """A ChatGPT conversation: `{conversation_id, title, create_time, current_node, mapping:
    {id: {message: {id, author: {role}, content: {content_type, parts}, create_time,
    recipient}, parent, children}}}`, read along the branch that ends at `current_node`."""
    key = _conversation_key(where, record, "conversation_id", "id")
    mapping = record.get("mapping")
    if not isinstance(mapping, dict):
        raise InvalidInput(f"{where}.mapping", "must be an object of message nodes")
    branch = _branch(f"{where}.mapping", mapping, record.get("current_node"))
    return key, _chatgpt_messages(f"{where}.mapping", mapping, branch)


def _branch(where: str, mapping: dict[Any, Any], leaf: object) -> list[str]:
    """The node ids from the root to `leaf` (without one, to the latest answer: each node's
    last child), in the order said."""
    if leaf is None or leaf == "":
        roots = [k for k, n in mapping.items() if isinstance(n, dict) and not n.get("parent")]
        node = roots[0] if roots else None
        passed: set[str] = set()  # (a node that is its own descendant was walked for ever)
        while isinstance(node, str) and isinstance(mapping.get(node), dict):
            if node in passed:
                raise InvalidInput(where, f"has a cycle of children through {as_json(node)}")
            passed.add(node)
            children = mapping[node].get("children") or []
            if not children:
                break
            node = children[-1]
        leaf = node
    ids: list[str] = []
    node = leaf
    while node is not None and node != "":
        if not isinstance(node, str) or not isinstance(mapping.get(node), dict):
            raise InvalidInput(where, f"has no node {as_json(node)}, which the branch read passes")
        if len(ids) > len(mapping):
            raise InvalidInput(where, f"has a cycle of parents through {as_json(node)}")
        ids.append(node)
        node = mapping[node].get("parent")
    return ids[::-1]


def _chatgpt_messages(where: str, mapping: dict[str, Any], branch: list[str]) -> Iterator[_Message]:
    for node in branch:
        at = f"{where}.{node}.message"
        message = mapping[node].get("message")
        if not isinstance(message, dict):  # (the root holds none)
            continue
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        speaker = _SPEAKERS.get(str(role))
        metadata = message.get("metadata")
        hidden = isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation")
        if speaker is None or hidden or message.get("recipient", "all") != "all":
            continue  # (system and tool messages, and the assistant's calls to a tool)
        content = message.get("content")
        if not isinstance(content, dict) or content.get("content_type") not in _SAID:
            continue  # (code run, pages browsed, reasoning: not what was said)
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise InvalidInput(f"{at}.content.parts", "must be a list of text parts")
        text = parts_text(f"{at}.content.parts", parts)
        yield at, message.get("id") or node, speaker, text, message.get("create_time")


_SAID = ("text", "multimodal_text")  # (an image's part is an object without text: left out)
