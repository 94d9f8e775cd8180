"""Text and JSON renderings of knowledge results, shared by the CLI and the MCP tool."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from octobrain.errors import cut_middle
from octobrain.knowledge.pages import ReadPage
from octobrain.knowledge.results import (
    IndexReport,
    KnowledgeStats,
    MatchReport,
    SearchResult,
    SourceInfo,
    StoredNote,
)
from octobrain.safe_text import one_line, quoted
from octobrain.times import iso_z

RULE = "=" * 50


def _chunks(n: int) -> str:
    return f"{n} chunk{'s' * (n != 1)}"


NO_RESULTS = (
    "No relevant knowledge found (nothing passed the relevance threshold). "
    "Try other words, name the source, or index it first."
)


def _scope(scope: str) -> str:
    return scope or "(global)"


def _ts(moment: datetime | None) -> str:
    return "" if moment is None else iso_z(moment, "seconds")


def to_dict(result: Any) -> Any:
    """Any knowledge result as JSON-ready data (datetimes as ISO-8601 strings)."""
    if isinstance(result, ReadPage):
        return {
            "uri": result.uri,
            "title": result.title,
            "type": result.doc_type,
            "text": result.text,
            "first_line": result.first_line,
            "last_line": result.last_line,
            "total_lines": result.total_lines,
            "shown_bytes": result.shown_bytes,
            "total_bytes": result.total_bytes,
            "cut": result.cut,
            "first_byte": result.first_byte,
            "next_line": result.next_line,
            "next_byte": result.next_byte,
        }
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return {f.name: to_dict(getattr(result, f.name)) for f in dataclasses.fields(result)}
    if isinstance(result, (list, tuple)):
        return [to_dict(v) for v in result]
    if isinstance(result, dict):
        return {k: to_dict(v) for k, v in result.items()}
    if isinstance(result, datetime):
        return _ts(result)
    return result


def render_index(report: IndexReport) -> str:
    """One line per index call: what happened to the source."""
    s = report.source
    where = f"scope {_scope(s.scope)}"
    if report.status == "unchanged":
        return f"✓ Cached {s.uri} (content unchanged, {_chunks(s.chunk_count)}, {where})"
    if report.status == "fresh":
        return f"✓ Cached {s.uri} (recently checked, {_chunks(s.chunk_count)}, {where})"
    if report.status == "repaired":
        return (
            f"✓ Re-indexed {s.uri} (its stored rows no longer matched their checksum, content "
            f"unchanged; {_chunks(report.embedded)} created, {where})"
        )
    verb = "Indexed" if report.status == "indexed" else "Re-indexed"
    return f"✓ {verb} {s.uri} ({_chunks(report.embedded)} created, {where})"


def _empty(result: SearchResult) -> str:
    """What an empty search says: what left the chunks out, and what to do."""
    if result.empty == "nothing_indexed":
        where = f"{result.scope} or the global scope" if result.scope else "the global scope"
        return (
            f"No knowledge found: nothing is indexed in {where} for this session (or in the "
            "source named). Index a file or URL first."
        )
    return NO_RESULTS


_STALE = {
    "changed": "Stale: the file changed since it was indexed; this is the indexed text "
    "(search naming it as source indexes it again).",
    "gone": "Stale: the file is gone since it was indexed; this is the indexed text "
    "(`octobrain knowledge delete-source` removes it).",
}


_STALE_LINES = {
    "changed": "Stale: the file changed since it was indexed; these are lines of the indexed "
    "text (match naming it as source reads it as it is now).",
    "gone": "Stale: the file is gone since it was indexed; these are lines of the indexed text "
    "(`octobrain knowledge delete-source` removes it).",
}


def render_search(result: SearchResult) -> str:
    """Results with title, source, section path, the section text and its relevance."""
    lines: list[str] = []
    if result.indexed is not None and result.indexed.status in ("indexed", "reindexed", "repaired"):
        lines += [render_index(result.indexed), ""]
    if not result.hits:
        return "\n".join([*lines, _empty(result)])
    for hit in result.hits:
        lines += [RULE, one_line(hit.title), one_line(hit.uri)]
        path = one_line(" > ".join(hit.section_path))
        if hit.session:
            path = f"[SESSION] {path}".strip()
        if path:
            lines.append(path)
        # A document's text indented: its lines cannot pass for a rule and another result.
        lines += ["", quoted(hit.text), "", f"Relevance: {hit.relevance:.0%}"]
        if hit.stale:
            lines.append(_STALE[hit.stale])
    lines.append(RULE)
    return "\n".join(lines)


# How a caller asks for the next page: the MCP tool's arguments, or the CLI's options.
TOOL_PAGING = ("from_line {line}", ", from_byte {byte}")
CLI_PAGING = ("--from-line {line}", " --from-byte {byte}")


def render_read(page: ReadPage, paging: tuple[str, str] = TOOL_PAGING) -> str:
    """The header block, then the page's text; when the page is not the whole text, a rule
    and a line saying which lines these are and where the next page starts, in `paging`'s
    words (the tool's arguments, or the command line's options)."""
    parts = [page.title, page.uri, f"Type: {page.doc_type}", RULE, page.text]
    if page.whole:
        return "\n".join(parts)
    if page.last_line > page.first_line:
        shown = f"Lines {page.first_line:,}–{page.last_line:,} of {page.total_lines:,}"
    else:
        shown = f"Line {page.first_line:,} of {page.total_lines:,}"
    if page.cut:
        last = page.first_byte + page.shown_bytes
        part = (
            f"its first {page.shown_bytes:,} bytes"
            if page.first_byte == 0
            else f"its bytes {page.first_byte + 1:,}–{last:,}"
        )
        shown += f" ({part} of {page.line_bytes:,}: a page holds at most {page.max_bytes:,})"
    else:
        since = f"line {page.first_line:,} from byte {page.first_byte + 1:,}; " * (
            page.first_byte > 0
        )
        shown += f" ({since}{page.shown_bytes:,} of {page.total_bytes:,} bytes)"
    line, byte = paging
    if page.cut:
        follow = f"Next page: {line}{byte}.".format(line=page.first_line, byte=page.next_byte)
    elif page.next_line is not None:
        follow = f"Next page: {line}.".format(line=page.next_line)
    else:
        follow = "End of the text."
    return "\n".join([*parts, RULE, f"{shown}. {follow}"])


PATTERN_SHOWN = 200  # characters of a pattern quoted back (a pattern may be 1 MiB)


def render_match(report: MatchReport) -> str:
    """`line: text` per match (`line- text` for context), grouped under each source's title,
    and the cap notice. As in grep, overlapping context prints once and `--` separates groups
    of lines that are not adjacent."""
    if not report.hits:
        n = report.sources_searched
        pattern = one_line(cut_middle(report.pattern, PATTERN_SHOWN))
        return f"No line matches /{pattern}/ in {n} source{'s' * (n != 1)}."
    with_context = any(hit.before or hit.after for hit in report.hits)
    lines: list[str] = []
    groups: dict[str, tuple[str, dict[int, tuple[str, str]]]] = {}
    stale = {hit.uri: hit.stale for hit in report.hits}
    for hit in report.hits:  # in source order, so dict order keeps the sources' order
        shown = groups.setdefault(hit.uri, (hit.title, {}))[1]
        first = hit.line_number - len(hit.before)
        for number, text in enumerate([*hit.before, None, *hit.after], first):
            if text is None:
                shown[number] = (":", hit.line)
            elif number not in shown:
                shown[number] = ("-", text)
    for uri, (title, shown) in groups.items():
        lines += [RULE, f"{title} — {uri}"]
        if stale.get(uri):
            lines.append(_STALE_LINES[stale[uri]])
        previous = None
        for number in sorted(shown):
            if with_context and previous is not None and number > previous + 1:
                lines.append("--")
            mark, text = shown[number]
            lines.append(f"{number:>6}{mark} {text}")
            previous = number
    lines.append(RULE)
    if report.truncated:
        lines.append(
            f"Showing the first {report.max_matches} matching lines; more exist "
            "(narrow the pattern, name a source, or raise max_matches)."
        )
    else:
        n = len(report.hits)
        lines.append(f"{n} matching line{'s' * (n != 1)}.")
    return "\n".join(lines)


def render_store(note: StoredNote) -> str:
    """Confirmation of a stored note."""
    return f"Stored '{note.key}' as {note.uri} ({_chunks(note.chunks)} indexed)"


def render_delete(key: str) -> str:
    """Confirmation of a deleted note."""
    return f"Deleted stored knowledge '{key}'"


def render_sources(sources: list[SourceInfo]) -> str:
    """The source listing, one line each."""
    if not sources:
        return "No sources indexed."
    out = []
    for s in sources:
        note = " [SESSION]" if s.session_id else ""
        out.append(
            f"{s.uri}{note}\n    {s.title} · {s.doc_type} · {_chunks(s.chunk_count)} · "
            f"scope {_scope(s.scope)} · checked {_ts(s.last_checked)}"
        )
        if s.outdated:
            out.append(
                "    read by an older extractor (or other chunk settings): "
                "`knowledge index` reads it again"
            )
    return "\n".join(out)


def render_stats(stats: KnowledgeStats) -> str:
    """Counts, types and index times."""
    types = ", ".join(f"{k} {v}" for k, v in sorted(stats.by_type.items())) or "none"
    avg = stats.chunks / max(1, stats.sources + stats.notes)
    return "\n".join(
        [
            f"Scope: {stats.scope} (plus global)" if stats.scope else "Scope: (global)",
            f"Sources: {stats.sources}   session notes: {stats.notes}",
            f"Chunks: {stats.chunks} (average {avg:.1f} per source"
            + (" or note)" if stats.notes else ")"),
            f"Types: {types}",
            f"Source size: {stats.size_bytes} bytes",
            f"Oldest index: {_ts(stats.oldest) or '-'}   newest: {_ts(stats.newest) or '-'}",
        ]
    )
