"""LoCoMo's conversations (its published file, one sample per conversation) read into the
shape every format is read into (`turns.Conversation`): each `session_<n>` a session dated by
its `session_<n>_date_time`, a shared photo's caption kept with its turn."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from octobrain.errors import InvalidInput, as_json, json_type
from octobrain.memory.turn_fields import same_id, speaker_name, turn_id, turn_name, turn_text
from octobrain.memory.turns import Conversation, Turn, listed
from octobrain.safe_text import shows_something
from octobrain.times import ISO_CHARS, iso_time, not_ahead

_SESSION = re.compile(r"^session_(\d{1,9})$")

_LOCOMO_DATE = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y", "%d %B %Y")


def _locomo_date(value: str) -> datetime | None:
    for pattern in _LOCOMO_DATE:
        try:
            return datetime.strptime(value.strip(), pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _session_date(field_name: str, body: dict[str, Any]) -> tuple[str, datetime | None]:
    """A LoCoMo session's date as written and when it was: LoCoMo's own form ("1:56 pm on 8
    May, 2023") or ISO-8601. One neither reads is refused: its turns were stored dated at the
    ingest, so a question bounded by time never found them."""
    value = body.get(field_name.rsplit(".", 1)[1])
    if value is None or value == "":
        return "", None
    if not isinstance(value, str):
        raise InvalidInput(field_name, f"must be a string, got {json_type(value)}")
    # Shown as written in its turns' titles, so held to what a title holds, as a speaker is:
    # Python reads any character between an ISO date and its time ("20230508\x00135600Z").
    value = turn_name(field_name, value, ISO_CHARS)
    moment = _locomo_date(value)
    if moment is None:
        try:
            moment = iso_time(field_name, value)
        except InvalidInput:
            raise InvalidInput(
                field_name,
                f"must be a date as LoCoMo writes it ('1:56 pm on 8 May, 2023') or ISO-8601, "
                f"got {as_json(value[:60])}",
            ) from None
    return value, not_ahead(field_name, moment, repr(value))


def locomo_conversations(samples: Iterable[Any]) -> list[Conversation]:
    """LoCoMo samples, one at a time: `conversation` holds `session_<n>` turn lists and their
    `session_<n>_date_time`; a shared photo's caption is kept with its turn."""
    out = []
    for i, sample in enumerate(samples):
        where = f"file[{i}]"
        body = sample.get("conversation", sample) if isinstance(sample, dict) else None
        if not isinstance(body, dict):
            raise InvalidInput(f"{where}.conversation", "must be an object of sessions")
        key = turn_id(f"{where}.sample_id", sample.get("sample_id")) or f"locomo-{i}"
        said: list[Turn] = []
        blank = 0
        # (the pattern takes at most 9 digits: a longer number names no session)
        named = sorted((int(m.group(1)), k) for k in body if (m := _SESSION.match(k)))
        for (n, name), (again, other) in itertools.pairwise(named):
            if n == again:  # `session_1` and `session_01`: one of them read twice, one lost
                raise InvalidInput(
                    f"{where}.conversation.{other}", f"names session {n} again (as {name} does)"
                )
        for n, name in named:
            date, moment = _session_date(f"{where}.conversation.{name}_date_time", body)
            turns = body[name]
            if not isinstance(turns, list):
                raise InvalidInput(f"{where}.conversation.{name}", "must be a list of turns")
            for j, turn in enumerate(turns):
                twhere = f"{where}.conversation.{name}[{j}]"
                if not isinstance(turn, dict):
                    raise InvalidInput(twhere, "must be an object with speaker and text")
                full = turn_name(f"{twhere}.speaker", turn.get("speaker"), None)
                speaker = speaker_name(full)
                text = turn_text(f"{twhere}.text", turn.get("text"))
                caption = turn.get("blip_caption")
                shared = caption if isinstance(caption, str) else ""
                if turn_text(f"{twhere}.blip_caption", shared).strip():
                    text = f"{text} [shares {shared.strip()}]"
                if not shows_something(text):  # (blank, or zero-width characters only)
                    blank += 1
                    continue
                given, former = same_id(turn_id(f"{twhere}.dia_id", turn.get("dia_id")))
                origin = f"{twhere}.dia_id" if given else twhere
                said.append(
                    Turn(
                        speaker,
                        text.strip(),
                        str(n),
                        given or f"D{n}:{j + 1}",
                        moment,
                        date,
                        origin,
                        former,
                        cut=f"{twhere}.speaker" if speaker is not full else "",
                    )
                )
        out.append(listed(key, said, blank))
    return out
