"""The `nooa-mcp eval` commands: LoCoMo retrieval with ablations, and replay of a store."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import click

from ..errors import NooaError
from .variants import ASKS, INGESTS

__all__ = ["eval_group"]


def embedder_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--embedder minilm|hash`: the bundled model, or the hash stand-in for smoke tests."""
    return click.option(
        "--embedder",
        type=click.Choice(["minilm", "hash"]),
        default="minilm",
        show_default=True,
        help=help,
    )


def _embedder(name: str):
    from ..embeddings import HashEmbedder, MiniLMEmbedder

    return HashEmbedder(384) if name == "hash" else MiniLMEmbedder()


@click.group(name="eval")
def eval_group() -> None:
    """Measure retrieval: LoCoMo with ablations, or replay a store's recorded recalls."""
    # The product as shipped: a served process runs one BLAS thread, so its vector index
    # multiplies with BLAS (`storage.vectors._kernel`); a process with BLAS's worker threads
    # multiplies with einsum, whose sums can differ in the last bit. Before numpy loads.
    from ..serving import single_threaded_blas

    single_threaded_blas()


@eval_group.command()
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.option("--conversations", type=int, default=None, help="Only the first N conversations.")
@click.option(
    "--ingest",
    type=click.Choice(INGESTS),
    default="tool",
    show_default=True,
    help="tool: each turn through memory_author, as a client writes; import: dated turns "
    "with precedes edges, as `nooa-mcp import` takes them.",
)
@click.option(
    "--ask",
    type=click.Choice(ASKS),
    default="recall",
    show_default=True,
    help="recall: memory_recall, live (every recall logs its accesses); explain: a dry run.",
)
@click.option(
    "--cells/--no-cells",
    default=True,
    show_default=True,
    help="Also run the shipped scorer on the other three ingest/ask paths.",
)
@click.option(
    "--time/--no-time",
    "time_cells",
    default=True,
    show_default=True,
    help="Also let time pass: a pass of the shipped maintenance years after the dated turns, "
    "one a year later with nothing asked, and a simulated clock with monthly passes.",
)
@embedder_option("hash is a deterministic stand-in for smoke tests, not a model.")
def locomo(
    file: Path,
    as_json: bool,
    conversations: int | None,
    ingest: str,
    ask: str,
    cells: bool,
    time_cells: bool,
    embedder: str,
) -> None:
    """Turn-level R@5/R@10/MRR on a LoCoMo FILE: the product as shipped, and every ablation.

    Each conversation goes into a fresh temporary store through the product's own interface
    (by default the memory_author tool, one call per turn, shipped defaults, background
    maintenance running) and each question is asked through memory_recall, live. The report
    shows the shipped scorer on all four ingest/ask paths beside the ablations. Questions of
    category 5 and without evidence are skipped. About ten minutes for the five dev
    conversations on two cores.
    """
    from .locomo import load_locomo
    from .locomo_run import run_locomo, total_steps
    from .variants import VARIANTS

    try:
        convs = load_locomo(file)[:conversations]
        model = _embedder(embedder)
        with click.progressbar(
            length=total_steps(convs, VARIANTS, cells, time_cells, ingest, ask),
            label="LoCoMo",
            file=sys.stderr,
        ) as bar:
            report = anyio.run(
                lambda: run_locomo(
                    file,
                    embedder=model,
                    conversations=convs,
                    progress=bar.update,
                    ingest=ingest,
                    ask=ask,
                    cells=cells,
                    time_cells=time_cells,
                )
            )
    except NooaError as exc:
        raise click.ClickException(str(exc)) from None
    _show(report, as_json)


@eval_group.command()
@click.option(
    "--store",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Store to replay (the same as the global --store or NOOA_STORE).",
)
@click.option(
    "--synthetic",
    is_flag=True,
    help="Replay a synthetic agent workload played into a temporary store instead of yours.",
)
@click.option("--sessions", type=int, default=40, show_default=True, help="Synthetic sessions.")
@click.option("--seed", type=int, default=0, show_default=True, help="Synthetic workload seed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@embedder_option("Model for the synthetic workload (replay itself embeds nothing).")
@click.pass_context
def replay(
    click_ctx: click.Context,
    store: Path | None,
    synthetic: bool,
    sessions: int,
    seed: int,
    as_json: bool,
    embedder: str,
) -> None:
    """Re-rank a store's recorded recalls under other weights, from the stored components.

    Replays the store named by --store (here or before `eval`) or NOOA_STORE, else the default
    store. Reports where memories that were used later (dereferenced, updated, linked or
    recalled again) would rank under each weight set, against the rank they were shown at.
    """
    import tempfile

    from ..config import Settings, default_store_path, store_target
    from ..embeddings import HashEmbedder
    from ..memory import Memory
    from .replay import read_stream, replay as run_replay, simulate

    root = click_ctx.find_root().obj
    target = None
    if not synthetic:
        named = store or getattr(root, "store", None)
        target = store_target(named) if named is not None else default_store_path()
        if isinstance(target, Path) and not target.is_file():
            raise click.ClickException(
                f"store: there is no store at {target}. Name one with --store PATH (or "
                "NOOA_STORE), or pass --synthetic to replay a made-up workload."
            )
    owner = getattr(root, "owner", None)
    as_json = as_json or bool(getattr(root, "as_json", False))

    async def body():
        with tempfile.TemporaryDirectory(prefix="nooa-replay-") as tmp:
            path = target or Path(tmp) / "workload.sqlite"
            settings = Settings.from_env(store=path, owner="eval" if synthetic else owner)
            model = _embedder(embedder) if synthetic else HashEmbedder(384)
            async with Memory.open(path, embedder=model, settings=settings) as mem:
                if synthetic:
                    await simulate(mem, sessions=sessions, seed=seed)
                stream = await read_stream(mem)
            return run_replay(stream, settings.recall)

    try:
        report = anyio.run(body)
    except NooaError as exc:
        raise click.ClickException(str(exc)) from None
    _show(report, as_json)


def _show(report: Any, as_json: bool) -> None:
    """A report as JSON for machines, or as its table."""
    click.echo(json.dumps(report.as_dict(), indent=2) if as_json else report.table())
