"""The `Knowledge` facade on real LanceDB, indexing: each type found, unchanged content not
re-embedded, an atomic re-index, chunks fitting the model, files refused, kept and read anew."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge, run_command
from octobrain.store import ModelMismatch
from octobrain.store.recreate import recreate
from tests.knowledge.service_support import GUIDE, count_file_reads, write_guide
from tests.traced import traced

from .conftest import SCOPE, CountingEmbedder, MakeKnowledge, write_docx, write_pdf


def test_each_type_is_indexed_and_a_query_finds_its_section(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    k = make_knowledge()
    (tmp_path / "notes.txt").write_text("Backups run nightly at two o'clock to cold storage.\n")
    write_pdf(tmp_path / "plan.pdf", [["Capacity plan", "Add four racks in March."]])
    write_docx(tmp_path / "handbook.docx")
    cases = {
        "guide.md": ("token bucket burst", "Rate limits"),
        "notes.txt": ("nightly backups cold storage", None),
        "plan.pdf": ("racks March", None),
        "handbook.docx": ("migrations before pods start", "Database migrations"),
    }
    write_guide(tmp_path)
    for name, (query, section) in cases.items():
        assert k.index(name).status == "indexed"
        hits = k.search(query).hits
        assert hits and hits[0].uri == (tmp_path / name).as_uri(), name
        if section:
            assert hits[0].section_path[-1] == section
    assert k.stats().sources == 4
    assert k.search("quantum chromodynamics lattice gluon").hits == []  # a relevance floor


def test_unchanged_content_is_not_re_embedded_and_changes_are(
    make_knowledge: MakeKnowledge, embedder: CountingEmbedder, tmp_path: Path
) -> None:
    k = make_knowledge()
    path = write_guide(tmp_path)
    first = k.search("token bucket", source="guide.md")
    assert first.indexed is not None and first.indexed.status == "indexed"
    calls = embedder.calls
    assert k.search("token bucket", source="guide.md").indexed.status == "fresh"  # type: ignore[union-attr]
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 10))  # touched, same text
    assert k.search("token bucket", source="guide.md").indexed.status == "unchanged"  # type: ignore[union-attr]
    assert k.index("guide.md").status == "unchanged"
    assert embedder.calls == calls
    path.write_text(GUIDE.replace("token bucket", "leaky bucket"))
    again = k.search("leaky bucket", source="guide.md")
    assert again.indexed is not None and again.indexed.status == "reindexed"
    assert embedder.calls == calls + 1
    assert "leaky bucket" in again.hits[0].text
    assert k.match("token bucket").hits == []  # the old text is gone
    assert k.kstore.count_chunks() == 3  # the old generation was deleted


def _kill_during_reindex(db: Path, source: Path, after_flip: bool) -> int:
    script = textwrap.dedent(
        f"""
        import os
        from octobrain.config import Config
        from octobrain.embed.factory import get_embedder
        from octobrain.knowledge import Knowledge
        from octobrain.knowledge.store import KnowledgeStore

        original = KnowledgeStore._flip
        def flip(self, row):
            if {after_flip!r}:
                original(self, row)
            os._exit(3)  # killed mid re-index
        KnowledgeStore._flip = flip
        k = Knowledge({SCOPE!r}, config=Config(), embedder=get_embedder("hash:64"), uri={str(db)!r})
        k.index({str(source)!r})
        """
    )
    return subprocess.run([sys.executable, "-c", script], check=False).returncode


@pytest.mark.parametrize("after_flip", [False, True])
def test_a_killed_re_index_leaves_one_complete_generation(
    make_knowledge: MakeKnowledge, tmp_path: Path, after_flip: bool
) -> None:
    k = make_knowledge()
    path = write_guide(tmp_path)
    k.index(str(path))
    path.write_text(GUIDE.replace("blue-green pipeline", "rainbow pipeline"))
    assert _kill_during_reindex(tmp_path / "db", path, after_flip) == 3
    fresh = make_knowledge()
    old, new = fresh.match("blue-green").hits, fresh.match("rainbow").hits
    hits = fresh.search("deploys release canaried pipeline").hits
    texts = " ".join(h.text for h in hits)
    if after_flip:  # the new generation is complete and the only one visible
        assert (old, len(new)) == ([], 1) and "rainbow" in texts and "blue-green" not in texts
    else:  # the old one is still searchable, the half-written one invisible
        assert (len(old), new) == (1, []) and "blue-green" in texts and "rainbow" not in texts
    assert fresh.kstore.count_chunks() == 6  # both generations' rows exist on disk
    assert [h.section_path[-1] for h in hits].count("Deployment") == 1
    report = fresh.index(str(path))
    assert report.status == ("unchanged" if after_flip else "reindexed")
    fresh.store("n", "A note makes a write that sweeps leftovers.")
    assert fresh.kstore.count_chunks() == 3 + 1


def test_the_search_mirror_holds_a_parent_text_once_not_once_per_chunk(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # Every chunk row carried its own copy of its parent (up to 4,800 bytes, about 5 chunks
    # a parent), and the first search converted every row of the store at once: 10 documents
    # of 3.8 MB (46,730 chunks) raised a server's memory by 1.4 GB.
    words = ["alpha", "beta", "gamma", "delta", "deploy", "review", "token", "cache"]
    sections = [
        f"## Part {s}\n\n"
        + "\n\n".join(
            " ".join(words[(s * 7 + p * 3 + w) % len(words)] for w in range(150)) for p in range(5)
        )
        for s in range(500)
    ]
    doc = tmp_path / "long.md"
    doc.write_text("# Handbook\n\n" + "\n\n".join(sections) + "\n")
    assert make_knowledge().index("long.md").embedded == 3000
    (tmp_path / "warm.md").write_text("# Warm\n\nalpha beta\n")
    found = traced(  # a new process: its first search reads every chunk
        f"""
        from pathlib import Path

        from octobrain.config import Config
        from octobrain.embed.factory import get_embedder
        from octobrain.knowledge import Knowledge
        from octobrain.knowledge import index as knowledge_index

        def prepare():
            root = Path({str(tmp_path)!r})
            embedder = get_embedder("hash:64")
            knowledge = lambda db: Knowledge({SCOPE!r}, config=Config(), embedder=embedder,
                                             uri=root / db, session_id="s1", cwd=root)
            warm = knowledge("warm")  # another store: what any search imports, apart
            warm.index("warm.md")
            warm.search("alpha")
            # Read a tenth of the rows at a time, as a store of 30,000 chunks would be read.
            knowledge_index.READ_BATCH = 300
            return [knowledge("db")]

        def work(fresh):
            return len(fresh.search("alpha deploy token").hits)
        """
    )
    assert found["result"] > 0
    # Held: each chunk row (its text, about 1,000 bytes, and its fields) and each parent once.
    assert found["peak"] < 6 * doc.stat().st_size, (found, doc.stat().st_size)


def test_a_note_or_file_made_only_of_headings_is_indexed_and_found(
    make_knowledge: MakeKnowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = make_knowledge(session_id="s1")
    out = run_command(k, {"command": "store", "key": "ops", "content": "# Rotate keys monthly"})
    assert out == "Stored 'ops' as stored://ops (1 chunk indexed)"  # was 0 chunks, never found
    assert [h.uri for h in k.search("rotate keys").hits] == ["stored://ops"]
    checklist = tmp_path / "checklist.md"
    checklist.write_text("# Release checklist\n\n## Tag the release\n## Publish the wheel\n")
    k.index(str(checklist))
    hits = k.search("publish wheel").hits
    assert hits and hits[0].uri.endswith("checklist.md")
    assert "Publish the wheel" in hits[0].text
    # A file indexed as 0 chunks by the code before is indexed again, though unchanged.
    headings = tmp_path / "headings.md"
    headings.write_text("# Renew the TLS certificate\n")
    monkeypatch.setattr("octobrain.knowledge.generation.chunk_text", lambda *a, **kw: [])
    assert k.index(str(headings)).source.chunk_count == 0
    monkeypatch.undo()
    again = k.index(str(headings))
    assert (again.status, again.source.chunk_count) == ("reindexed", 1)
    assert k.index(str(headings)).status == "unchanged"


def test_another_model_is_a_clear_error(make_knowledge: MakeKnowledge, tmp_path: Path) -> None:
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder

    make_knowledge().index(str(write_guide(tmp_path)))
    other = Knowledge(SCOPE, config=Config(), embedder=get_embedder("hash:32"), uri=tmp_path / "db")
    with pytest.raises(ModelMismatch, match="embedded with 'hash:64'"):
        other.search("token bucket")


class _BundledTokens(CountingEmbedder):
    """Hash vectors under the bundled model's id, so chunks are cut to MiniLM's window."""

    @property
    def model_id(self) -> str:
        from octobrain.modelspec import BUNDLED_MODEL_ID

        return BUNDLED_MODEL_ID


def test_chunks_fit_the_models_window_and_changing_the_setting_reindexes(tmp_path: Path) -> None:
    from octobrain.embed.tokens import input_window

    from .conftest import config

    # Token-dense text: 1,200-byte chunks of it run past 256 wordpiece tokens.
    text = "# Cytokines\n\n" + " ".join(
        f"IL-{i} TNF-α/NF-κB p{i}.{i % 7} mg/kg (CD4+)." for i in range(150)
    )
    (tmp_path / "cytokines.md").write_text(text)
    window = input_window(_BundledTokens().model_id)
    assert window is not None
    max_tokens, count = window

    def index(fit: bool) -> tuple[str, list[int]]:
        k = Knowledge(
            SCOPE,
            config=config(chunk_fit_model=fit),
            embedder=_BundledTokens(),  # type: ignore[arg-type]
            uri=tmp_path / "db",
            cwd=tmp_path,
        )
        status = k.index("cytokines.md").status
        return status, [count(r["content"]) for r in k.kstore.scan_chunks("true")]

    status, bytes_only = index(False)
    assert status == "indexed" and max(bytes_only) > max_tokens  # the model would truncate
    status, fitted = index(True)
    assert status == "reindexed"  # same text, new chunking: re-chunked and re-embedded
    assert max(fitted) <= max_tokens and len(fitted) > len(bytes_only)


def test_a_source_of_more_chunks_than_allowed_is_refused_before_any_is_embedded(
    make_knowledge: MakeKnowledge, embedder: CountingEmbedder, tmp_path: Path
) -> None:
    # One MCP call could make the server embed a 50 MB source: about 58,000 chunks, hours.
    (tmp_path / "book.md").write_text(
        "".join(f"Chapter {i} says the fox jumps over the dog. " * 30 + "\n\n" for i in range(40))
    )
    k = make_knowledge(max_source_chunks=10)
    calls = embedder.calls
    with pytest.raises(InvalidInput, match=r"^source: .*book\.md makes more than 10 chunks, the"):
        k.index("book.md")
    assert embedder.calls == calls and k.list_sources() == []
    assert make_knowledge().index("book.md").status == "indexed"


def test_an_index_run_again_after_the_tables_started_over_shows_its_progress_once(
    make_knowledge: MakeKnowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process started the tables over (`doctor --recreate knowledge`) while this one
    # embedded: the write failed and the call ran again, embedding every batch
    # again, and the progress bar went back to its start and ran a second time.
    kb = make_knowledge()
    kb.index(str(write_guide(tmp_path)))
    big = tmp_path / "big.md"
    big.write_text("# Big\n\n" + "\n\n".join(f"Part {i} " + "word " * 200 for i in range(150)))
    replace = kb.kstore.replace_source
    started_over = []

    def moved_aside_first(*args: object) -> None:
        if not started_over:
            started_over.extend(recreate(kb.kstore.location, "knowledge", {"knowledge_chunks"}))
        replace(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(kb.kstore, "replace_source", moved_aside_first)
    shown: list[tuple[int, int]] = []
    report = kb.index(str(big), progress=lambda done, total: shown.append((done, total)))
    assert started_over and report.status == "indexed" and report.embedded > 64
    total = report.embedded
    assert shown == [(min(done, total), total) for done in range(64, total + 64, 64)]
    assert [h.title for h in kb.search("Part 7 word").hits][:1] == ["Big"]


def test_a_file_refused_for_its_chunks_is_refused_again_without_being_read(
    make_knowledge: MakeKnowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each call naming it read, extracted and cut the whole file again before the same refusal
    # (a 45 MB file of one line: 1.35 s of CPU a call, from any client that names it).
    book = tmp_path / "book.md"
    book.write_text("\n\n".join(f"# Part {i}\n\n" + "word " * 300 for i in range(40)))
    reads = count_file_reads(monkeypatch)
    k = make_knowledge(max_source_chunks=10)
    for _ in range(3):
        with pytest.raises(InvalidInput, match=r"book\.md makes more than 10 chunks"):
            k.search("word", source="book.md")
    assert len(reads) == 1
    with book.open("a") as f:  # changed: read again (and here still refused)
        f.write("\nmore words\n")
    with pytest.raises(InvalidInput, match=r"makes more than 10 chunks"):
        k.index("book.md")
    assert len(reads) == 2
    # Other settings cut it otherwise: read again, and indexed.
    assert make_knowledge(max_source_chunks=1000).index("book.md").status == "indexed"
    assert len(reads) == 3


def test_the_kept_text_of_files_is_bounded_by_the_memory_it_takes(
    make_knowledge: MakeKnowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bound counted characters: one emoji in a text makes Python hold each of its
    # characters in 4 bytes, so 64 M characters kept for paging were 256 MB, not 64.
    import octobrain.knowledge.service as service
    from octobrain.knowledge.by_file import ByFile

    reads = count_file_reads(monkeypatch)
    monkeypatch.setattr(service, "_EXTRACTED", ByFile(kept=8, budget=1 << 20))
    k = make_knowledge()
    line = "A line of the book, plain words.\n"
    plain, wide = tmp_path / "plain.md", tmp_path / "wide.md"
    plain.write_text(line * 8000)  # 264 kB of text: 264 kB in memory
    wide.write_text("\N{ROCKET}\n" + line * 8000)  # the same and an emoji: 1.06 MB in memory
    for path in (plain, wide):
        assert k.read(path.name).text == k.read(path.name).text
    assert reads.count(plain.as_uri()) == 1 and reads.count(wide.as_uri()) == 2, reads


def test_a_file_rewritten_at_its_size_and_time_is_read_anew(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # The extracted text was kept by the file's inode, size and modification time: a file
    # rewritten in place at the same size within the same clock tick, or given its old time
    # back (`cp -p`, `touch -r`, an archive unpacked), was served as it had been before.
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe service listens on port 8080.\n")
    before = notes.stat()
    k = make_knowledge()
    assert "8080" in k.read("notes.md").text
    notes.write_text("# Notes\n\nThe service listens on port 9090.\n")
    os.utime(notes, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert notes.stat().st_size == before.st_size
    assert "9090" in k.read("notes.md").text
