"""What one MCP `knowledge match` holds: the texts of a batch of sources, not of every one."""

from __future__ import annotations

from pathlib import Path

from tests.traced import traced

SOURCES = 48
SOURCE_BYTES = 1_000_000


def test_a_match_holds_a_batch_of_texts_and_a_named_source_only_its_own(tmp_path: Path) -> None:
    # Before: every visible source's text was read at once, even for a match limited to one
    # source: 12 documents of 7 MB raised the server's peak by 275 MB for a match of a
    # three-line note, and a project's match grew with everything it ever indexed.
    line = "alpha beta gamma delta deploy review token cache port server listen\n"
    for k in range(SOURCES):
        (tmp_path / f"d{k}.txt").write_text(f"doc {k}\n" + line * (SOURCE_BYTES // len(line)))
    (tmp_path / "small.md").write_text("# Small\n\nthe needle is here\n")
    found = traced(
        f"""
        from pathlib import Path

        import anyio
        from mcp import Client

        from octobrain.config import Config, EmbeddingConfig, KnowledgeConfig
        from octobrain.server import BrainPool
        from tests.server_support import PROJECT_A, call, server_for

        ROOT = Path({str(tmp_path)!r})

        def server():
            config = Config(
                embedding=EmbeddingConfig(model="hash:64"),
                knowledge=KnowledgeConfig(  # few chunks a document: quick to index
                    chunk_size=200_000, chunk_overlap=0, parent_size=400_000,
                    chunk_fit_model=False,
                ),
            )
            return server_for(BrainPool(config, uri=ROOT / "db"), ROOT, PROJECT_A)

        def prepare():
            async def index():
                async with Client(server()) as client:
                    for name in [*(f"d{{k}}.txt" for k in range({SOURCES})), "small.md"]:
                        error, reply = await call(
                            client, "knowledge", command="search", query="needle",
                            source=str(ROOT / name),
                        )
                        assert not error, reply
            anyio.run(index)
            return [server()]

        def work(fresh):
            import tracemalloc

            replies, peaks = [], []
            async def match():
                async with Client(fresh) as client:
                    for source in (str(ROOT / "small.md"), None):
                        tracemalloc.reset_peak()
                        named = {{"source": source}} if source else {{}}
                        replies.append(await call(
                            client, "knowledge", command="match", pattern="needle", **named
                        ))
                        peaks.append(tracemalloc.get_traced_memory()[1])
            anyio.run(match)
            return [replies, peaks]
        """
    )
    replies, (named_peak, every_peak) = found["result"]
    for error, reply in replies:
        assert not error and "3: the needle is here" in reply and "1 matching line" in reply
    # All 48 texts are 48 MB; a batch of 16 is 16 MB, each held once as it is searched.
    assert every_peak < 28 * SOURCE_BYTES, found
    assert named_peak < SOURCE_BYTES, found  # the note's text, not the 48 documents
