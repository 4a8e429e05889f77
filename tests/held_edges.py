"""The edges a `HeldLinks` holds, as comparable rows (tests of the held edges)."""

from __future__ import annotations

from nooa_mcp.storage.links import HeldLinks


def held_edges(links: HeldLinks) -> list[tuple[str, str, str, float]]:
    """Every edge held as (source id, target id, relation, weight), sorted: the same for two
    holders of the same edges, whatever codes their ends were given."""
    return sorted(
        (links.ends[s], links.ends[d], links._kind_names[k], w)
        for s, d, k, w in zip(
            links.src.tolist(),
            links.dst.tolist(),
            links.kind.tolist(),
            links.weight.tolist(),
            strict=True,
        )
    )
