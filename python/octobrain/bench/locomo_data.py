"""LoCoMo's data for `bench locomo`: the file a `--data` path names, its conversations (read
as `memory ingest` reads LoCoMo's format) and its questions with their evidence turns; a
file that cannot be read, or is not LoCoMo's, refused in one line naming `--data`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import Conversation, parse_text, read_text

__all__ = ["Question", "load_locomo", "locomo_file"]


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    evidence: tuple[str, ...]  # dia ids ("D3:5")
    category: int


_KNOWN_NAMES = ("locomo-dev.json.gz", "locomo10.json", "locomo.json")


def locomo_file(data: Path) -> Path:
    """The LoCoMo file `data` names: the file itself, or in a directory the file of a known
    name (`locomo-dev.json.gz`, `locomo10.json`, `locomo.json`), else its one `*.json` or
    `*.json.gz` file (a held-out half named after itself, `locomo-test.json.gz`). Several such
    files, or none, is an error naming them."""
    if data.is_file():
        return data
    if not data.exists():  # (it said "holds no LoCoMo file", as of an empty folder)
        raise InvalidInput("data", f"{data}: no such file or directory")
    for name in _KNOWN_NAMES:
        if (data / name).is_file():
            return data / name
    found = (
        sorted(p for p in data.iterdir() if p.name.endswith((".json", ".json.gz")) and p.is_file())
        if data.is_dir()
        else []
    )
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(p.name for p in found)
        raise InvalidInput("data", f"{data} holds several LoCoMo files ({names}): name one")
    raise InvalidInput(
        "data", f"{data} holds no LoCoMo file (locomo-dev.json.gz, locomo10.json or one *.json)"
    )


def load_locomo(data: Path) -> tuple[list[Conversation], list[Question]]:
    """The conversations and questions of the LoCoMo file `data` names (`locomo_file`); a
    file that cannot be read, or is not LoCoMo's, refused naming `data` and where it breaks."""
    path = locomo_file(data)
    try:
        text = read_text(path, "data")
        conversations = parse_text(text, "locomo")
    except InvalidInput as err:
        where = "" if err.field in ("data", "file") else f" {err.field}:"
        raise InvalidInput("data", f"{path}:{where} {err.rule}") from None
    try:
        samples = json.loads(text)
    except json.JSONDecodeError:  # (JSON lines, one sample each, as `parse_text` read them)
        samples = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not isinstance(samples, list):  # (one sample alone, as `parse_text` read it)
        samples = [samples]
    questions = [
        question
        for conv, sample in zip(conversations, samples, strict=True)
        for question in _questions(path, conv.key, sample)
    ]
    turns = sum(len(c.turns) for c in conversations)
    if not turns or not questions:
        # (`{}` or `[]` measured nothing, exit 0, and `--update` emptied the README's table.)
        raise InvalidInput(
            "data",
            f"{path} holds {turns} turns and {len(questions)} questions: not LoCoMo data "
            "(a list of samples, each with its conversation and its qa)",
        )
    return conversations, questions


def _questions(path: Path, key: str, sample: dict[str, Any]) -> list[Question]:
    """The questions of one LoCoMo sample (its `qa`), refused naming where one breaks."""
    qas = sample.get("qa", [])
    where = f"{path}: sample {key!r}: qa"
    if not isinstance(qas, list):
        raise InvalidInput("data", f"{where}: must be a list of questions")
    out = []
    for i, qa in enumerate(qas):
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
            raise InvalidInput("data", f"{where}[{i}]: must be an object with a question string")
        category = qa.get("category")
        if not isinstance(category, int) or isinstance(category, bool):
            raise InvalidInput("data", f"{where}[{i}].category: must be an integer (1–5)")
        given = qa.get("evidence") or []
        if not isinstance(given, list):
            raise InvalidInput("data", f"{where}[{i}].evidence: must be a list of turn ids")
        # A few annotations hold several ids in one string ("D8:6; D9:17").
        ids = [p.strip() for e in given for p in str(e).split(";")]
        evidence = tuple(dict.fromkeys(e for e in ids if e.startswith("D")))
        out.append(Question(key, qa["question"], evidence, category))
    return out
