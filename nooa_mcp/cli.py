"""The `nooa-mcp` command: the MCP server by default, and memory verbs for people.

Each command opens the store, makes one facade call and renders the reply as a table (or as
JSON with `--json`). Library errors become click errors at this edge, so a person sees the
message that names the field and the fix, never a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import click

from .config import Settings, default_store_path
from .domain.schema import REFLECTION_STEPS
from .errors import NooaError

BATCH = 256


class Context:
    def __init__(self, store: Path | None, owner: str | None) -> None:
        self.store = store
        self.owner = owner

    def settings(self) -> Settings:
        return Settings.from_env(store=self.store, owner=self.owner)


def run(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """Run an async command body; turn NooaError into a clean click error."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return anyio.run(functools.partial(fn, *args, **kwargs))
        except NooaError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper


def emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    if as_json:
        if hasattr(data, "model_dump"):
            data = data.model_dump(mode="json")
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(render(data))


def open_memory(ctx: Context):  # -> async context manager of Memory
    from .memory import Memory

    return Memory.open(settings=ctx.settings())


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain fixed-width table; the last column is left unpadded."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")


@click.group(invoke_without_command=True)
@click.option(
    "--store",
    type=click.Path(path_type=Path),
    envvar="NOOA_STORE",
    help=f"Store file (env NOOA_STORE; default {default_store_path()}).",
)
@click.option(
    "--owner", envvar="NOOA_OWNER", help="Whose memory this is: role[@instance] (env NOOA_OWNER)."
)
@click.version_option(package_name="nooa-mcp")
@click.pass_context
def main(click_ctx: click.Context, store: Path | None, owner: str | None) -> None:
    """nooa-mcp: long-term memory for agents. With no command, serves MCP over stdio."""
    click_ctx.obj = Context(store, owner)
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(serve)


@main.command()
@click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8765, show_default=True, type=int, help="HTTP port.")
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(path_type=Path, exists=True),
    help="JSON file mapping bearer token → owner; requests without one are refused.",
)
@click.pass_obj
def serve(
    ctx: Context,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    tokens_file: Path | None = None,
) -> None:
    """Serve MCP (stdio by default, or streamable HTTP on loopback)."""
    from .mcp import server

    try:
        server.run(
            ctx.settings(), transport=transport, host=host, port=port, tokens_file=tokens_file
        )
    except NooaError as exc:
        raise click.ClickException(str(exc)) from None


@main.command()
@click.argument("text")
@click.option(
    "--type",
    "type_",
    default="info",
    show_default=True,
    help="info, skill, episode, intent, todo, reflection or scratch.",
)
@click.option("--title", default="")
@click.option(
    "--importance",
    default="MEDIUM",
    show_default=True,
    help="CRITICAL, HIGH, MEDIUM, LOW, TRIVIAL or 0–10.",
)
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--entity", "entities", multiple=True, help="An entity (repeatable).")
@json_option
@click.pass_obj
@run
async def author(
    ctx: Context,
    text: str,
    type_: str,
    title: str,
    importance: str,
    tags: tuple[str, ...],
    entities: tuple[str, ...],
    as_json: bool,
) -> None:
    """Remember TEXT."""
    async with open_memory(ctx) as mem:
        result = await mem.author(
            text,
            type=type_,
            title=title,
            importance=importance,
            tags=list(tags),
            entities=list(entities),
        )
    emit(result, as_json, lambda r: f"{r.status}  {r.id}")


@main.command()
@click.argument("query")
@click.option("-k", "k", default=5, show_default=True, type=int)
@click.option("--scope", default="mine", show_default=True, help="mine, instance, * or an owner.")
@click.option("--hops", type=int, default=None, help="Spreading depth (0 = search only).")
@json_option
@click.pass_obj
@run
async def recall(
    ctx: Context, query: str, k: int, scope: str, hops: int | None, as_json: bool
) -> None:
    """Recall the memories that best match QUERY, with their score components."""
    async with open_memory(ctx) as mem:
        await mem.wait_ready()
        result = await mem.recall(query, k=k, scope=scope, hops=hops)
    emit(result, as_json, _render_recall)


def _render_recall(r: Any) -> str:
    rows = [
        [
            h.rank,
            h.id8,
            h.type.value,
            f"{h.score:.3f}",
            h.components.source,
            f"{h.components.cos:.2f}",
            f"{h.components.rel:.2f}",
            f"{h.components.rec:.2f}",
            f"{h.components.imp:.2f}",
            f"{h.components.spread:.2f}",
            ("weak " if h.flags.weak else "")
            + ("stale " if h.flags.stale else "")
            + (f"superseded-by:{h.flags.superseded_by[:8]} " if h.flags.superseded_by else ""),
            (h.title or h.content)[:60].replace("\n", " "),
        ]
        for h in r.hits
    ]
    out = table(
        [
            "#",
            "id",
            "type",
            "score",
            "source",
            "cos",
            "rel",
            "rec",
            "imp",
            "spread",
            "flags",
            "memory",
        ],
        rows,
    )
    return out + (f"\n{r.note}" if r.note else "")


@main.command()
@click.argument("query", required=False)
@click.option("--id", "memory_id", help="A memory id or 8-char prefix.")
@click.option("-k", "k", default=10, show_default=True, type=int)
@click.option("--scope", default="mine", show_default=True)
@json_option
@click.pass_obj
@run
async def explain(
    ctx: Context, query: str | None, memory_id: str | None, k: int, scope: str, as_json: bool
) -> None:
    """Explain a ranking (QUERY), a memory's history (--id), or why it was not recalled (both)."""
    async with open_memory(ctx) as mem:
        await mem.wait_ready()
        result = await mem.explain(query, memory_id=memory_id, k=k, scope=scope)
    emit(result, as_json, _render_explain)


def _render_explain(r: Any) -> str:
    parts = []
    if r.rows:
        rows = [
            [
                x.rank,
                x.id[:8],
                f"{x.score:.3f}",
                x.source,
                f"{x.cos:.2f}",
                f"{x.rel:.2f}",
                f"{x.rec:.2f}",
                f"{x.imp:.2f}",
                f"{x.spread:.2f}",
                x.type.value,
                (" ".join(x.path) + " " if x.path else "") + x.head[:50],
            ]
            for x in r.rows
        ]
        parts.append(
            table(
                [
                    "#",
                    "id",
                    "score",
                    "source",
                    "cos",
                    "rel",
                    "rec",
                    "imp",
                    "spread",
                    "type",
                    "memory",
                ],
                rows,
            )
        )
    if r.mode == "replay":
        rows = [
            [
                a.ts.strftime("%Y-%m-%d %H:%M:%S"),
                a.channel.value,
                a.rank or "",
                "" if a.score is None else f"{a.score:.3f}",
                a.reader_owner,
                (a.query or "")[:50],
            ]
            for a in r.accesses
        ]
        parts.append(f"{r.total_accesses} accesses of {r.memory_id}")
        parts.append(table(["when", "channel", "rank", "score", "reader", "query"], rows))
    if r.why_not:
        w = r.why_not
        parts.append(
            f"\n{w.reason}\nretention {w.retention:.3f}, prune ETA {w.prune_eta:%Y-%m-%d}"
            if w.prune_eta
            else f"\n{w.reason}"
        )
    return "\n".join(parts)


@main.command()
@json_option
@click.option("--scope", default="mine", show_default=True)
@click.pass_obj
@run
async def stats(ctx: Context, as_json: bool, scope: str) -> None:
    """Counts and health of the store."""
    async with open_memory(ctx) as mem:
        result = await mem.stats(scope=scope)
    emit(result, as_json, _render_stats)


def _render_stats(s: Any) -> str:
    rows = [
        ["store", s.store],
        ["memories", s.total],
        ["active", s.active],
        ["archived", s.archived],
        ["edges", s.edges],
        ["accesses", s.accesses],
        ["embeddings", s.embeddings],
    ]
    rows += [[f"type {k}", v] for k, v in s.by_type.items()]
    rows += [[f"owner {k or '(shared)'}", v] for k, v in s.by_owner.items()]
    rows += [[k, v] for k, v in s.extra.items()]
    return table(["what", "value"], rows)


@main.command(name="import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@json_option
@click.pass_obj
@run
async def import_(ctx: Context, file: Any, as_json: bool) -> None:
    """Import memories from a JSONL FILE (one memory per line, as `export` writes)."""
    lines = [(n, line) for n, line in enumerate(file, 1) if line.strip()]
    specs, edges = [], []
    for n, line in lines:
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise click.ClickException(
                f"line {n}: not JSON ({exc.msg}). Nothing was imported."
            ) from None
        if not isinstance(item, dict):
            raise click.ClickException(f"line {n}: expected an object. Nothing was imported.")
        specs.append(item)
    counts: dict[str, int] = {}
    async with open_memory(ctx) as mem:
        await mem.wait_ready()
        with click.progressbar(length=len(specs), label="importing", file=sys.stderr) as bar:
            for i in range(0, len(specs), BATCH):
                chunk = specs[i : i + BATCH]
                results = await mem.author_many([_import_spec(s) for s in chunk])
                for spec, result in zip(chunk, results, strict=True):
                    counts[result.status] = counts.get(result.status, 0) + 1
                    for e in spec.get("edges") or []:
                        edges.append((result.id, e))
                bar.update(len(chunk))
        linked = await mem.import_edges(edges)
    counts["edges"] = linked
    emit(counts, as_json, lambda c: "  ".join(f"{k}: {v}" for k, v in c.items()))


_IMPORT_FIELDS = (
    "id",
    "content",
    "type",
    "title",
    "importance",
    "salience",
    "confidence",
    "tags",
    "entities",
    "place_or_task",
    "created_at",
    "valid_from",
    "valid_to",
    "status",
    "trigger",
    "references",
)


def _import_spec(item: dict[str, Any]) -> dict[str, Any]:
    spec = {k: item[k] for k in _IMPORT_FIELDS if item.get(k) is not None}
    if isinstance(spec.get("trigger"), dict):
        spec["trigger"] = {
            k: v for k, v in spec["trigger"].items() if k in ("fire_at", "cue", "every_hours")
        }
    if spec.get("references"):
        spec["references"] = [r["uri"] if isinstance(r, dict) else r for r in spec["references"]]
    return spec


@main.command()
@click.option("--include-archived", is_flag=True, help="Also export archived memories.")
@click.pass_obj
@run
async def export(ctx: Context, include_archived: bool) -> None:
    """Export memories as JSONL on stdout (one memory per line)."""
    async with open_memory(ctx) as mem:
        after = None
        while True:
            page = await mem.list_memories(
                archived=None if include_archived else False, limit=500, after=after
            )
            if not page:
                break
            for seq, view in page:
                after = seq
                record = view.model_dump(
                    mode="json", include=set(_IMPORT_FIELDS) | {"owner", "archived"}
                )
                record["edges"] = [
                    {"target": e["target"], "type": e["type"], "weight": e["weight"]}
                    for e in view.edges
                ]
                record["references"] = [r.uri for r in view.references]
                click.echo(json.dumps(record, ensure_ascii=False))


# ---------------------------------------------------------------------------- reflect (issue 4)
# Owned by the living-memory work; kept in one block so the rest of the CLI merges cleanly.


@main.command()
@click.option(
    "--step",
    "steps",
    multiple=True,
    type=click.Choice(REFLECTION_STEPS),
    help="Run only this step (repeatable). Default: all, in order.",
)
@json_option
@click.pass_obj
@run
async def reflect(ctx: Context, steps: tuple[str, ...], as_json: bool) -> None:
    """Consolidate memory now: merge near-duplicates, link neighbours, rescore, prune.

    Each item is committed on its own, so Ctrl-C leaves a consistent store and the next run
    picks up where this one stopped. Reconcile and abstract need a client's model (MCP
    sampling) and are skipped here.
    """
    async with open_memory(ctx) as mem:
        with click.progressbar(
            length=1,
            label="reflecting",
            file=sys.stderr,
            show_pos=True,
            item_show_func=lambda item: item,
        ) as bar:

            async def progress(done: int, total: int, message: str) -> None:
                bar.length = max(total, done, 1)
                bar.update(done - bar.pos, current_item=message)

            report = await mem.reflect(list(steps) or None, progress=progress)
    emit(report, as_json, _render_reflect)


def _render_reflect(r: Any) -> str:
    rows = [[s.step, s.planned, s.applied, s.skipped, s.failed, s.note] for s in r.steps]
    seconds = (r.finished_at - r.started_at).total_seconds() if r.finished_at else 0.0
    return (
        table(["step", "planned", "applied", "skipped", "failed", "note"], rows)
        + f"\n{r.status}: {r.applied} changes in {seconds:.1f} s"
    )


# --------------------------------------------------------------------------- eval (issue 5)
# Owned by the evaluation work: the `eval` group lives in nooa_mcp/evaluation/cli.py.
from .evaluation.cli import eval_group  # noqa: E402

main.add_command(eval_group)


# --------------------------------------------------------------------------- ui (issue 14)
# Owned by the console work: the web front end lives in nooa_mcp/console/.


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option("--port", default=8766, show_default=True, type=int, help="Port.")
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(path_type=Path, exists=True),
    help="JSON file mapping token → owner: sign in with a token instead of --owner.",
)
@click.pass_obj
def ui(ctx: Context, host: str, port: int, tokens_file: Path | None) -> None:
    """Serve the memory console in a browser (loopback only without --tokens)."""
    import contextlib

    from .console.serve import serve as serve_console
    from .mcp.identity import load_tokens

    settings = ctx.settings()

    async def body() -> None:
        tokens = load_tokens(tokens_file) if tokens_file else None
        if tokens and settings.owner:
            raise click.ClickException(
                "--owner and --tokens both name an owner: with a tokens file each token is its "
                "own owner, so leave out --owner (or NOOA_OWNER)."
            )
        await serve_console(settings, host=host, port=port, tokens=tokens, announce=click.echo)

    # uvicorn re-raises the Ctrl-C it caught once it has shut down cleanly.
    with contextlib.suppress(KeyboardInterrupt):
        run(body)()
