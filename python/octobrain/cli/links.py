"""`octobrain memory relate|unrelate|graph`: the links between memories, from a terminal. Added
to the `memory` group by `cli/memory.py`; answered by the resident service as the other memory
commands are."""

from __future__ import annotations

import click

from octobrain.cli.common import FORMAT_OPTION, command_brain, emit
from octobrain.models import LINK_DESCRIPTION_CHARS, LINK_TYPES


@click.command("relate")
@click.argument("source_id")
@click.argument("target_id")
@click.option(
    "-t",
    "--relationship-type",
    default="related_to",
    show_default=True,
    help=f"One of {', '.join(LINK_TYPES)}.",
)
@click.option("-s", "--strength", type=float, default=0.8, show_default=True, help="0–1.")
@click.option(
    "-d",
    "--description",
    default="",
    help=f"Why they are linked (at most {LINK_DESCRIPTION_CHARS} characters).",
)
@FORMAT_OPTION
@click.pass_context
def relate_cmd(
    ctx: click.Context,
    source_id: str,
    target_id: str,
    relationship_type: str,
    strength: float,
    description: str,
    fmt: str,
) -> None:
    """Link two memories: SOURCE --type--> TARGET."""
    from octobrain.memory.render import relationship_to_dict, settled_lines
    from octobrain.times import utcnow

    asked = utcnow()
    rel, settled, closed = command_brain(ctx).link(
        source_id, target_id, relationship_type, strength=strength, description=description
    )
    line = f"{rel.source_id} {rel.relationship_type.value} {rel.target_id}"
    existed = rel.created_at < asked  # the link was there: `relate` keeps it as it is
    if existed:
        line += (
            f" (already linked, with strength {rel.strength:g}"
            + (f" and description {rel.description!r}" if rel.description else "")
            + ": kept; `memory unrelate` it first to link it anew)"
        )
    line = "\n".join([line, *settled_lines(settled)])
    closing: dict[str, object] = {}
    if closed is not None:  # (a `closes` link to a goal its findings still achieve)
        line += f"\n{closed.description}, under {closed.parent.id}"
        closing = {"consolidated": [m.id for m in closed.members], "parent": closed.parent.id}
    # (JSON said so too: a script saw the old strength come back and could not tell why.)
    data = {**relationship_to_dict(rel), "already_linked": existed, **closing}
    emit(fmt, {**data, "settled": [relationship_to_dict(e) for e in settled]}, line)


@click.command("unrelate")
@click.argument("source_id")
@click.argument("target_id")
@click.option(
    "-t",
    "--relationship-type",
    default=None,
    help="Only links of this type (default: every type `relate` makes, and auto_linked).",
)
@FORMAT_OPTION
@click.pass_context
def unrelate_cmd(
    ctx: click.Context, source_id: str, target_id: str, relationship_type: str | None, fmt: str
) -> None:
    """Remove the links SOURCE --type--> TARGET (the memories stay)."""
    from octobrain.memory.render import relationship_to_dict

    removed = command_brain(ctx).unrelate(source_id, target_id, relationship_type)
    emit(
        fmt,
        {"removed": [relationship_to_dict(r) for r in removed]},
        "\n".join(
            f"removed {r.source_id} {r.relationship_type.value} {r.target_id}" for r in removed
        ),
    )


@click.command("graph")
@click.argument("memory_id")
@click.option("-d", "--depth", type=int, default=2, show_default=True, help="Edges away (1–5).")
@FORMAT_OPTION
@click.pass_context
def graph_cmd(ctx: click.Context, memory_id: str, depth: int, fmt: str) -> None:
    """Memories linked to MEMORY_ID, up to DEPTH edges away."""
    from octobrain.memory.render import memory_to_dict, relationship_to_dict

    mems, rels = command_brain(ctx).graph(memory_id, depth)
    titles = {m.id: m.title for m in mems}
    text = "\n".join(
        f"{titles[r.source_id]}  --{r.relationship_type.value}-->  {titles[r.target_id]}"
        for r in rels
    )
    data = {
        "memories": [memory_to_dict(m) for m in mems],
        "relationships": [relationship_to_dict(r) for r in rels],
    }
    emit(fmt, data, text or "No relationships.")


LINK_COMMANDS = [relate_cmd, unrelate_cmd, graph_cmd]
