"""A memory's gist: extractive within its budget, and what a briefing and a recall show of a faded
episode."""

from __future__ import annotations

from datetime import timedelta

from octobrain.embed.tokens import estimate_tokens
from octobrain.memory.briefing import build_briefing
from octobrain.memory.gist import compress
from octobrain.memory.render import format_recall
from octobrain.models import MemoryType
from octobrain.times import utcnow
from tests.brain_support import MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared
from tests.briefing_support import API, COUNT, add_at

LONG_BUG = (
    "The nightly export crashed with a timezone error. "
    "Rows written around midnight UTC had naive datetimes from the legacy importer. "
    "We traced it through three services before finding the importer. "
    "The exporter assumed aware datetimes everywhere. "
    "The fix normalises importer datetimes to UTC at the boundary. "
    "A regression test now writes rows at 23:59 and 00:01 and exports them."
)


def test_gist_is_extractive_and_within_budget() -> None:
    gist = compress(LONG_BUG, 160)
    assert len(gist) <= 160 and gist.startswith("The nightly export crashed")
    assert all(part in LONG_BUG for part in gist.removesuffix(" …").split(". "))


def test_sentences_left_out_are_marked_where_they_were() -> None:
    # Kept sentences with others skipped between them were joined as if they followed each
    # other: "… legacy importer. A regression test now writes rows …" read as one account.
    first, second, third, fourth = (
        "The nightly export crashed on Monday.",
        "Nobody was paged because the alert was muted.",
        "Lunch was late that day.",
        "The nightly export now pins the clock.",
    )
    gist = compress(" ".join((first, second, third, fourth)), 80)
    assert gist == f"{first} … {fourth}"  # the two export sentences share the most words
    assert compress(" ".join((first, second, third)), 40) == f"{first} …"  # the rest cut
    assert compress(f"{first} {fourth}", 80) == f"{first} {fourth}"  # nothing left out
    for budget in range(38, 200, 7):
        assert len(compress(" ".join((first, second, third, fourth)), budget)) <= budget


def test_text_the_model_cannot_read_is_neither_folded_nor_undercounted() -> None:
    # The bundled tokenizer reads Amharic, Thai and emoji as [UNK]: three unrelated Amharic
    # rules had near-identical vectors (one shown "+2 similar"), and 50 emoji counted 1 token.
    from octobrain.memory.summary import same_claims

    database = "ለዚህ ፕሮጀክት PostgreSQL እንጠቀማለን ምክንያቱም ግብይቶች ያስፈልጉናል።"
    friday = "አርብ ቀን ምንም ነገር ወደ ምርት አንለቅም።"
    assert not same_claims(database, friday)  # no word in common: not a restatement
    assert same_claims("Use tabs for indentation.", "Indentation uses tabs, always.")
    for text in ("😀" * 50, "เราจะไม่ปล่อยของขึ้นระบบจริงในวันศุกร์", friday):
        assert COUNT(text) >= estimate_tokens(text), text
    assert COUNT("The user prefers pytest with plain asserts.") == 10  # as the tokenizer says


def test_a_digest_s_gist_keeps_its_points_with_their_labels() -> None:
    # The labels were the shortest "sentences": a gist read "… Errors fixed: Files touched: …".
    digest = (
        "Decisions:\n- We decided to lazy-load the avatar images on the login page.\n\n"
        "Errors fixed:\n- The root cause was a naive datetime in the nightly export job.\n\n"
        "Files touched: config.yaml, src/export.py"
    )
    assert compress(digest, 80) == (
        "Decisions: We decided to lazy-load the avatar images on the login page. …"
    )
    assert "Errors fixed: The root cause was" in compress(digest, 400)


def test_each_point_of_a_list_reads_as_its_own_sentence() -> None:
    # A digest's points without a full stop ran together on the briefing's line:
    # "Decisions: We decided that last week Here is the receipt we decided to keep …".
    digest = (
        "Decisions:\n- We decided that last week\n- Here is the receipt we decided to keep\n"
        '- Is it "done?"\n- We chose blue-green…\n\n'
        "Errors fixed:\n- Fixed the flaky export test by pinning the clock\n\n"
        "Files touched: src/export.py"
    )
    assert compress(digest, 400) == (
        "Decisions: We decided that last week. Here is the receipt we decided to keep. "
        'Is it "done?" We chose blue-green… '
        "Errors fixed: Fixed the flaky export test by pinning the clock. "
        "Files touched: src/export.py"
    )
    assert len(compress(digest, 60)) <= 60  # (the stops count in the budget)
    # A line break inside a paragraph (hard-wrapped prose) is no point's end.
    wrapped = "We decided to normalise all\ntimestamps to UTC.\n1. first step\n2. second step"
    assert compress(wrapped, 400) == (
        "We decided to normalise all timestamps to UTC. first step. second step"
    )


def test_faded_old_episode_shows_its_gist_and_keeps_its_full_text(make_brain: MakeBrain) -> None:
    brain = make_brain(API)
    when = utcnow() - timedelta(days=10)
    old = add_at(
        brain,
        "Export timezone crash",
        LONG_BUG,
        when,
        memory_type=MemoryType.BUG_FIX,
        importance=0.2,
    )
    fresh = add_at(
        brain,
        "Export retry bug",
        "The hourly export retried forever on a 429 from the billing API; it now backs off.",
        utcnow(),
        memory_type=MemoryType.BUG_FIX,
        importance=0.2,
    )
    briefing = build_briefing(brain, count_tokens=COUNT)
    items = {i.memory.id: i for i in briefing.items}
    assert items[old.id].gist and len(items[old.id].text) <= brain.config.brief.gist_max_chars
    assert not items[fresh.id].gist
    recall = brain.remember("export timezone crash importer", record_access=False)
    hit = next(h for h in recall.hits if h.memory.id == old.id)
    assert hit.gist and hit.memory.content == LONG_BUG  # the full text stays reachable
    assert f"full text: octobrain memory get {old.id}" in format_recall(recall)
    assert brain.get(old.id).content == LONG_BUG
