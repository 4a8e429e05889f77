"""The `nooa-mcp` command: the MCP server by default, and memory verbs for people.

Each command opens the store, makes one facade call and renders the reply as a table (or as
JSON with `--json`). Library errors become click errors at this edge, so a person sees the
message that names the field and the fix, never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click
from click.core import ParameterSource

from . import startup_gc
from .config import Settings, default_store_path, url_scheme
from .domain.kinds import REFLECTION_STEPS
from .domain.scope import parse_owner, parse_roles
from .errors import InvalidInput, NooaError

if TYPE_CHECKING:
    from .memory import Memory


class Context:
    def __init__(
        self,
        store: str | None,
        owner: str | None,
        reference_root: Path | None = None,
        as_json: bool = False,
        read: str | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.reference_root = reference_root
        self.as_json = as_json
        self.read = read

    def settings(self) -> Settings:
        read = [r for r in self.read.split(",") if r.strip()] if self.read else None
        return Settings.from_env(
            store=self.store, owner=self.owner, reference_root=self.reference_root, read=read
        )


#: The tools' argument names as the CLI spells them. The services name what was wrong by
#: the tool's field (`links.target`); at a terminal the person typed a flag, so the refusal
#: names the flag they can fix.
CLI_NAMES = {
    "content": "TEXT",
    "query": "QUERY",
    "type": "--type",
    "title": "--title",
    "tags": "--tag",
    "entities": "--entity",
    "hops": "--hops",
    "scope": "--scope",
    "memory_id": "--id",
    "links": "--link",
    "links.target": "--link",
    "links.relation": "--link",
    "references": "--ref",
    "importance": "--importance",
    "authored_importance": "--importance",
    "trigger": "--fire-at/--cue",
    "trigger.cue": "--cue",
    "trigger.every_hours": "--every-hours",
    "every_hours": "--every-hours",
    "fire_at": "--fire-at",
    "valid_from": "--valid-from",
    "valid_to": "--valid-to",
}


def cli_message(exc: NooaError, names: dict[str, str] | None = None) -> str:
    """The error's sentence with the tool's field names turned into the CLI's flags (`names`:
    a command's own spellings, e.g. its ID argument for memory_id)."""
    text = str(exc)
    field = getattr(exc, "field", None)
    if not isinstance(field, str) or not text.startswith(f"{field}: "):
        return text
    if names and field in names:
        return f"{names[field]}: {text[len(field) + 2 :]}"
    rest = re.sub(
        r"\b(fire_at|every_hours|valid_from|valid_to)\b",
        lambda m: CLI_NAMES[m.group(1)],
        text[len(field) + 2 :],
    )
    if field == "trigger":
        rest = rest.replace(", cue (", ", --cue (")
    return f"{CLI_NAMES.get(field, field)}: {rest}"


def run(
    fn: Callable[..., Coroutine[Any, Any, Any]], names: dict[str, str] | None = None
) -> Callable[..., Any]:
    """Run an async command body; turn NooaError into a clean click error."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return anyio.run(functools.partial(fn, *args, **kwargs))
        except NooaError as exc:
            raise click.ClickException(cli_message(exc, names)) from None

    return wrapper


#: The spellings of commands that take the memory's id as their ID argument.
ID_ARGUMENT = {"memory_id": "ID"}


def run_by_id(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """`run` for a command whose ID argument is the tool's memory_id."""
    return run(fn, ID_ARGUMENT)


def emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    """Print a reply as JSON (the command's or the global `--json`) or as its rendering."""
    context = click.get_current_context(silent=True)
    root = context.find_object(Context) if context is not None else None
    if as_json or (root is not None and root.as_json):
        if hasattr(data, "model_dump"):
            data = data.model_dump(mode="json")
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(render(data))


@contextlib.asynccontextmanager
async def open_memory(ctx: Context, *, create: bool = True) -> AsyncIterator[Memory]:
    """The configured store's Memory. A command that only reads passes `create=False`: a
    mistyped --store must not leave an empty store (and its folders) behind; nor does a
    command that creates one and is then refused (`undone_if_refused`)."""
    from .memory import Memory

    settings = ctx.settings()
    if not create:
        must_exist(settings.store)
        await must_hold_store(settings.store)
    with undone_if_refused(settings.store):
        async with Memory.open(settings=settings) as mem:
            yield mem


#: Why a command refuses a store that is not there (`must_exist`, `must_hold_store`).
ONLY_READS = "this command only reads"
#: `ui` writes (the console's actions), but serves a store that exists: a typo in --store
#: made the console open a new, empty store, showing nothing where the user's memories were.
SERVES_ONE = "the console opens an existing store"


def must_exist(store: Path | str, why: str = ONLY_READS) -> None:
    """Refuse a store file that is not there, naming it (a PostgreSQL URL is not checked
    here: `must_hold_store` asks its server)."""
    from .storage import store_kind

    if store_kind(store) == "sqlite" and not Path(store).exists():
        raise click.ClickException(
            f"No store at {store}: {why}, and nothing was ever written "
            "there. Check --store (or NOOA_STORE) for a typo; `nooa-mcp author` creates a "
            "store with its first memory."
        )


async def must_hold_store(store: Path | str, why: str = ONLY_READS) -> None:
    """Refuse a PostgreSQL URL whose schema holds no store, naming it: opening it would create
    the schema (`must_exist` for a file)."""
    from .storage import store_kind

    if store_kind(store) != "postgresql":
        return
    try:
        from .storage.postgres import holds_store
    except ModuleNotFoundError as exc:  # no driver: opening the store says how to install it
        if exc.name in ("psycopg", "psycopg_pool"):
            return
        raise
    missing = await holds_store(str(store))
    if missing is not None:
        raise click.ClickException(
            f"No store at {missing}: {why}, and nothing was ever written "
            "there. Check the schema in --store (or NOOA_STORE) for a typo; `nooa-mcp author` "
            "creates a store with its first memory."
        )


@contextlib.contextmanager
def undone_if_refused(store: Path | str) -> Iterator[None]:
    """A command that fails after it created a store file leaves none if nothing was written
    into it: no empty store, no `-wal`/`-shm` beside it, no folders made for it (a refused
    import must not look, the next time, like a store that took the file). A store holding a
    memory is kept whatever failed after the write, and so is one another process has open
    (its `-wal`/`-shm` outlive this command's connection: SQLite removes them with the last
    one), which a server started at the same moment may be about to write into."""
    from .storage import file_holds_memories, store_kind

    if store_kind(store) != "sqlite" or Path(store).exists():
        yield
        return
    path = Path(store).absolute()
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    try:
        yield
    except BaseException:
        sides = [path.with_name(path.name + end) for end in _SIDE_FILES]
        # The side files first: reading the file to look for memories makes its own.
        if any(side.exists() for side in sides) or file_holds_memories(path):
            raise
        for leftover in (path, *sides):
            leftover.unlink(missing_ok=True)
        for folder in made:  # innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


#: SQLite's files beside a database.
_SIDE_FILES = ("-wal", "-shm", "-journal")


def stderr_is_terminal() -> bool:
    """Whether a person watches stderr (tests make it one to see the bar)."""
    return sys.stderr.isatty()


class _NoBar:
    """What a progress bar is to a pipe or a file: its count, and nothing written (click's
    bar would print its label alone there, a stray line in a log)."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.pos = 0

    def update(self, n: int, current_item: Any = None) -> None:
        self.pos += n


@contextlib.contextmanager
def progress_bar(length: int, label: str, **options: Any) -> Iterator[Any]:
    """click's progress bar on stderr when a person watches it (a terminal); none otherwise."""
    if not stderr_is_terminal():
        yield _NoBar(length)
        return
    with click.progressbar(length=length, label=label, file=sys.stderr, **options) as bar:
        yield bar


def reminder_lines(reminders: list[Any], more: int = 0) -> list[str]:
    """The intents that fired on this command: a person must see them, since firing spends
    a one-shot intent (the next session start will not show it again)."""
    lines = []
    for r in reminders:
        also = f", and {len(r.also)} more with this text" if r.also else ""
        again = ", re-armed" if r.rearmed else ""
        lines.append(
            f"Reminder ({r.reason}{r.lateness()}, intent {r.intent_id[:8]}{also}{again}): "
            f"{r.content}"
        )
    if more:
        lines.append(f"{more} more reminder(s) are due: they come with the next commands.")
    return lines


def with_reminders(text: str, result: Any) -> str:
    lines = reminder_lines(result.reminders, result.reminders_more)
    return "\n".join([text, *lines]) if lines else text


def other_roles_line(hidden: dict[str, int], owner: str) -> str:
    """Why an empty answer may not mean an empty store: other roles hold memories."""
    total = sum(hidden.values())
    listed = ", ".join(f"{role}: {n}" for role, n in hidden.items())
    seen_as = (
        f"to --owner {owner} (its role's and shared memories)"
        if owner
        else "without --owner (shared memories only)"
    )
    return (
        f"No memory here is visible {seen_as}, but this store holds {total} live "
        f"memor{'y' if total == 1 else 'ies'} of other roles ({listed}). Pass --owner with one "
        f"of them (for example --owner {next(iter(hidden))}), or set NOOA_OWNER."
    )


async def hidden_note(mem: Any) -> str:
    hidden = await mem.other_roles()
    return other_roles_line(hidden, mem.owner) if hidden else ""


def local_time(text: str | None) -> str | None:
    """A time typed at the terminal without Z or an offset is the typist's own clock: this
    machine's local time, made explicit (the store reads a time without one as UTC, which is
    right for a model's arguments and hours off for a person's). Anything that is not an ISO
    8601 time goes on as typed, for the store to name the field and the fix."""
    from .domain.schema import iso_time

    value = iso_time(text) if text else None
    if value is None:
        return text
    try:
        return (value if value.tzinfo is not None else value.astimezone()).isoformat()
    except (OverflowError, ValueError):
        return text  # past the range local time can hold: the store names the field


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


class EnvOption(click.Option):
    """An option whose refusal names the variable it was read from (`NOOA_JSON=abc` is a
    mistake in NOOA_JSON, not in a `--json` nobody typed)."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        name = self.name or ""
        if ctx is not None and ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT:
            names = [self.envvar] if isinstance(self.envvar, str) else list(self.envvar or [])
            if names:
                return " / ".join(f"'{n}'" for n in names)
        return super().get_error_hint(ctx)


def _checked(parse: Callable[[str], object]) -> Callable[..., str | None]:
    """An option callback that refuses a value `parse` refuses, as click refuses a bad
    value: naming the option typed, or the variable it came from (`EnvOption`)."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            try:
                parse(value)
            except InvalidInput as exc:
                raise click.BadParameter(f"{exc.problem} {exc.fix}".strip()) from None
        return value

    return callback


@click.group(invoke_without_command=True)
@click.option(
    "--store",
    # Text, not click.Path: a postgresql://host/db URL must reach the store as written.
    envvar="NOOA_STORE",
    cls=EnvOption,
    help=f"Store file or postgresql:// URL (env NOOA_STORE; default {default_store_path()}).",
)
@click.option(
    "--owner",
    envvar="NOOA_OWNER",
    cls=EnvOption,
    callback=_checked(parse_owner),
    help="Whose memory this is: role[@instance] (env NOOA_OWNER).",
)
@click.option(
    "--read",
    envvar="NOOA_READ",
    cls=EnvOption,
    callback=_checked(parse_roles),
    help="Roles this owner may also read, comma-separated, or * (env NOOA_READ). Without it, "
    "scope * or another role's name searches only your own role.",
)
@click.option(
    "--reference-root",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="NOOA_REFERENCE_ROOT",
    cls=EnvOption,
    help="Folder that file: references are relative to (env NOOA_REFERENCE_ROOT).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    envvar="NOOA_JSON",
    cls=EnvOption,
    help="Print JSON for machines (every command; env NOOA_JSON=1).",
)
@click.version_option(package_name="nooa-mcp")
@click.pass_context
def main(
    click_ctx: click.Context,
    store: str | None,
    owner: str | None,
    read: str | None,
    reference_root: Path | None,
    as_json: bool,
) -> None:
    """nooa-mcp: long-term memory for agents. With no command, serves MCP over stdio."""
    click_ctx.obj = Context(store, owner, reference_root, as_json, read)
    if click_ctx.invoked_subcommand not in (None, "serve"):
        # Paused by `__main__` for a server's start-up; a stdio server restarts it once
        # warm, an HTTP server before it serves (`serving.run`).
        startup_gc.resume()
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(serve)


def tokens_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--tokens FILE`, the tokens file of a server or the console (`mcp.identity`)."""
    return click.option(
        "--tokens", "tokens_file", type=click.Path(path_type=Path, exists=True), help=help
    )


allow_host_option = click.option(
    "--allow-host",
    "allow_host",
    multiple=True,
    metavar="NAME",
    help="A host name or IP address clients may use in the Host header besides the bound "
    "host and loopback, e.g. the machine's address with --host 0.0.0.0 (repeatable; env "
    "NOOA_ALLOWED_HOSTS, comma-separated).",
)


def _with_hosts(settings: Settings, names: tuple[str, ...]) -> Settings:
    if not names:
        return settings
    return settings.model_copy(update={"allowed_hosts": [*settings.allowed_hosts, *names]})


@main.command()
@click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="HTTP port."
)
@tokens_option("JSON file mapping bearer token → owner; requests without one are refused.")
@allow_host_option
@click.pass_obj
def serve(
    ctx: Context,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    tokens_file: Path | None = None,
    allow_host: tuple[str, ...] = (),
) -> None:
    """Serve MCP (stdio by default, or streamable HTTP on loopback)."""
    from . import serving

    serving.single_threaded_blas()
    try:
        settings = _with_hosts(ctx.settings(), allow_host)
        # The server opens its store inside the MCP lifespan, where a wrong URL or a database
        # that is down would end in a traceback: check a PostgreSQL store first.
        anyio.run(_reachable, settings.store)
        if transport == "stdio" and sys.stdin.isatty():
            # Run by hand in a terminal, the server would wait in silence for a client's
            # JSON-RPC on stdin; an MCP client starts it on pipes and never sees this.
            click.echo(
                "nooa-mcp is serving MCP over stdio for an MCP client (store "
                f"{serving.shown_store(settings.store)}); "
                "to try it from a shell, see `nooa-mcp --help`. Ctrl-C to stop.",
                err=True,
            )
        serving.run(settings, transport=transport, host=host, port=port, tokens_file=tokens_file)
    except NooaError as exc:
        raise click.ClickException(str(exc)) from None


async def _reachable(target: Path | str) -> None:
    from .storage import open_store, store_kind

    if store_kind(target) == "postgresql":
        await (await open_store(target)).close()


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
    help="CRITICAL, HIGH, MEDIUM (a new memory's default), LOW, TRIVIAL or 0–10.",
)
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--entity", "entities", multiple=True, help="An entity (repeatable).")
@click.option(
    "--ref",
    "refs",
    multiple=True,
    help="A reference instead of a copy: file:<path under --reference-root>, memory:<id> or "
    "url:<address> (repeatable).",
)
@click.option(
    "--fire-at",
    help="For --type intent: fire once this ISO 8601 time has passed (this machine's local "
    "time unless it ends in Z or an offset).",
)
@click.option("--cue", help="For --type intent: fire when these words come up later.")
@click.option("--every-hours", type=float, help="For --type intent: re-arm after firing.")
@click.option(
    "--link",
    "links",
    multiple=True,
    metavar="ID[:RELATION]",
    help="Link it to a memory (id or 8-char prefix): related unless a relation is named, e.g. "
    "a1b2c3d4:refines for a correction (repeatable).",
)
@click.option("--valid-from", help="True from this ISO 8601 time on (local time unless Z).")
@click.option(
    "--valid-to",
    help="True until this ISO 8601 time (local time unless Z); past it, recall and list show "
    "the memory stale (a time already past is stored, with a note).",
)
@click.option(
    "--revive",
    is_flag=True,
    help="Keep a write that a forgotten memory blocks (in the same words, that memory is "
    "restored).",
)
@json_option
@click.pass_obj
@run
async def author(
    ctx: Context,
    text: str,
    type_: str,
    title: str,
    importance: str | None,
    tags: tuple[str, ...],
    entities: tuple[str, ...],
    refs: tuple[str, ...],
    fire_at: str | None,
    cue: str | None,
    every_hours: float | None,
    links: tuple[str, ...],
    valid_from: str | None,
    valid_to: str | None,
    revive: bool,
    as_json: bool,
) -> None:
    """Remember TEXT (`-` reads it from stdin: `cat notes.txt | nooa-mcp author -`)."""
    from .domain.schema import iso_time

    if text == "-":
        text = sys.stdin.read()
    triggers = (("--fire-at", fire_at), ("--cue", cue), ("--every-hours", every_hours))
    given = [flag for flag, value in triggers if value is not None]
    if given and type_.strip().lower() != "intent":
        raise click.UsageError(
            f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for intents: add "
            f"--type intent (the type given is {type_})."
        )
    for flag, value in (
        ("--fire-at", fire_at),
        ("--valid-from", valid_from),
        ("--valid-to", valid_to),
    ):
        if value and iso_time(value) is None:
            raise click.BadParameter(
                f"'{value}' is not an ISO 8601 time: write e.g. 2030-01-01T09:00 (local time) "
                "or 2030-01-01T09:00Z.",
                param_hint=flag,
            )
    trigger = {"fire_at": local_time(fire_at), "cue": cue, "every_hours": every_hours}
    linked = parse_links(links)
    async with open_memory(ctx) as mem:
        result = await mem.author(
            text,
            type=type_,
            title=title,
            importance=importance,
            tags=list(tags),
            entities=list(entities),
            references=list(refs) or None,
            trigger={k: v for k, v in trigger.items() if v is not None} or None,
            links=linked or None,
            valid_from=local_time(valid_from),
            valid_to=local_time(valid_to),
            revive=revive,
        )
    past = _past_valid_to(valid_to)
    if past and result.status != "blocked-by-tombstone":
        # Stored as given (a fact that held until then is worth keeping), but a mistyped year
        # would make a current fact stale from its first recall: say so, on stderr.
        click.echo(
            f"Note: --valid-to {past} has already passed, so recall flags this memory stale "
            "and ranks it lower; if it still holds, change it with nooa-mcp update ID "
            "--valid-to LATER.",
            err=True,
        )
    emit(result, as_json, lambda r: with_reminders(author_text(r), r))


def _past_valid_to(text: str | None) -> str | None:
    """The --valid-to given, as UTC, when it has already passed; None otherwise."""
    from datetime import UTC

    from .domain.schema import iso_time, now

    shown = local_time(text) if text else None
    when = iso_time(shown) if shown else None
    if when is None or when.tzinfo is None or when >= now():
        return None
    return f"{when.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def author_text(r: Any) -> str:
    """`STATUS  ID`, then what the tool's reply also says (`AuthorResult.notes`), with the
    CLI's options for a successor and a revive."""
    notes = r.notes(relink="write it with --link {id}:refines", revive="--revive")
    return "\n".join([f"{r.status}  {r.id}", *notes])


@main.command()
@click.argument("query")
@click.option(
    "-k", "k", default=5, show_default=True, type=click.IntRange(1, 50), help="How many (1-50)."
)
@click.option("--scope", default="mine", show_default=True, help="mine, instance, * or an owner.")
@click.option("--hops", type=int, default=None, help="Spreading depth (0 = search only).")
@json_option
@click.pass_obj
@run
async def recall(
    ctx: Context, query: str, k: int, scope: str, hops: int | None, as_json: bool
) -> None:
    """Recall the memories that best match QUERY, with their score components."""
    async with open_memory(ctx, create=False) as mem:
        await mem.wait_ready()
        result = await mem.recall(query, k=k, scope=scope, hops=hops)
        hidden = "" if result.hits else await hidden_note(mem)
    emit(result, as_json, lambda r: "\n".join(filter(None, [_render_recall(r), hidden])))


def _cos(value: float | None) -> str:
    """A cosine, or "-" when none was computed (keyword-only)."""
    return "-" if value is None else f"{value:.2f}"


def _render_recall(r: Any) -> str:
    if not r.hits:
        return with_reminders(r.note, r)
    rows = [
        [
            h.rank,
            h.id8,
            h.type.value,
            f"{h.score:.3f}",
            h.components.source,
            _cos(h.components.cos),
            f"{h.components.rel:.2f}",
            f"{h.components.rec:.2f}",
            f"{h.components.imp:.2f}",
            f"{h.components.spread:.2f}",
            _flag_words(h.flags),
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
    refs = [
        f"{h.rank}  ref {ref.uri}: {ref.state}" + (f" ({ref.note})" if ref.note else "")
        for h in r.hits
        for ref in h.references
    ]
    lines = [out, *refs] + ([r.note] if r.note else [])
    return with_reminders("\n".join(lines), r)


@main.command()
@click.argument("query", required=False)
@click.option("--id", "memory_id", help="A memory id or 8-char prefix.")
@click.option(
    "-k", "k", default=10, show_default=True, type=click.IntRange(1, 50), help="How many (1-50)."
)
@click.option("--scope", default="mine", show_default=True)
@click.option("--hops", type=int, default=None, help="Spreading depth (0 = search only).")
@json_option
@click.pass_obj
@run
async def explain(
    ctx: Context,
    query: str | None,
    memory_id: str | None,
    k: int,
    scope: str,
    hops: int | None,
    as_json: bool,
) -> None:
    """Explain a ranking (QUERY), a memory's history (--id), or why it was not recalled (both)."""
    if query is None and memory_id is None:
        raise click.UsageError("Give a QUERY, --id ID, or both.")
    async with open_memory(ctx, create=False) as mem:
        await mem.wait_ready()
        result = await mem.explain(query, memory_id=memory_id, k=k, scope=scope, hops=hops)
    emit(result, as_json, _render_explain)


def _flag_words(f: Any) -> str:
    """A hit's or a row's flags as the flags column shows them, each followed by a space."""
    return (
        ("weak " if f.weak else "")
        + ("stale " if f.stale else "")
        + (f"from:{f.holds_from:%Y-%m-%d} " if f.holds_from else "")
        + (f"superseded-by:{f.superseded_by[:8]} " if f.superseded_by else "")
        + (f"newer-version:{f.newer_version[:8]} " if f.newer_version else "")
        + ("faded " if f.faded else "")
    )


def _explain_flags(x: Any) -> str:
    return (_flag_words(x.flags) + ("forgotten " if x.forgotten else "")).strip()


def _terms_cell(t: Any) -> str:
    """The terms a score adds up (`ScoreTerms`): the scaled, weighted rel, rec and imp, then,
    named, spreading, a penalty and a version's move where not 0."""
    if t is None:
        return ""
    cell = f"{t.rel:.3f}+{t.rec:.3f}+{t.imp:.3f}"
    for name, value in (("spread", t.spread), ("penalty", t.penalty), ("order", t.order)):
        if abs(value) >= 0.0005:
            cell += f" {value:+.3f} {name}"
    return cell


def _render_explain(r: Any) -> str:
    if r.mode == "query" and not r.rows:
        return "\n".join(filter(None, ["Nothing stored matches this query.", r.note]))
    parts = []
    if r.rows:
        rows = [
            [
                x.rank,
                x.id[:8],
                f"{x.score:.3f}",
                _terms_cell(x.terms),
                x.source,
                _cos(x.cos),
                f"{x.rel:.2f}",
                f"{x.rec:.2f}",
                f"{x.imp:.2f}",
                f"{x.spread:.2f}",
                x.type.value,
                _explain_flags(x),
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
                    "= rel'+rec'+imp' (scaled, weighted)",
                    "source",
                    "cos",
                    "rel",
                    "rec",
                    "imp",
                    "spread",
                    "type",
                    "flags",
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
        parts.append(f"{r.total_accesses} accesses of {r.memory_id} ({r.state or 'live'})")
        if r.note:
            parts.append(r.note)
        parts.append(table(["when", "channel", "rank", "score", "reader", "query"], rows))
    if r.why_not:
        w = r.why_not
        scores = []
        if w.score is not None:
            scores.append(f"score {w.score:.3f} = {_terms_cell(w.terms)}")
        if w.kth_score is not None:
            scores.append(f"rank {w.k}'s {w.kth_score:.3f} = {_terms_cell(w.kth_terms)}")
        parts.append(
            f"\n{w.id[:8]} for {r.query!r}: {w.reason}"
            + (f"\n{'; '.join(scores)}" if scores else "")
            + f"\nretention {w.retention:.3f}"
            + (f", prune ETA {w.prune_eta:%Y-%m-%d}" if w.prune_eta else "")
            + ("" if w.prune_eta or w.archived else ", never pruned (protected)")
        )
    if r.note:
        parts.append(r.note)
    return "\n".join(parts)


@main.command()
@json_option
@click.option("--scope", default="mine", show_default=True)
@click.pass_obj
@run
async def stats(ctx: Context, as_json: bool, scope: str) -> None:
    """Counts and health of the store."""
    async with open_memory(ctx, create=False) as mem:
        # The person at the terminal named the store (or took the default): its whole path
        # says which file was counted.
        result = (await mem.stats(scope=scope, show_path=True)).model_dump(mode="json")
        hidden = await mem.other_roles() if result["active"] == 0 else {}
        owner = mem.owner
    if hidden:
        result["other_roles"] = hidden
        result["note"] = " ".join(filter(None, [result["note"], other_roles_line(hidden, owner)]))
    # The model loads beside a one-shot command that never needs it: "warming" would read as
    # a state to wait for. Counting needs no model, so say whether this process has it.
    if result["embeddings"] != "ready":
        result["embeddings"] = "not loaded (not needed to count)"
    emit(result, as_json, _render_stats)


def _render_stats(s: dict[str, Any]) -> str:
    rows = [
        ["store", s["store"]],
        ["memories", s["total"]],
        ["active", s["active"]],
        ["archived", s["archived"]],
        ["edges", s["edges"]],
        ["accesses", s["accesses"]],
        ["embeddings", s["embeddings"]],
    ]
    # Of the active memories (not archived): they add up to `active`, not to `memories`.
    rows += [[f"active, type {k}", v] for k, v in s["by_type"].items()]
    rows += [[f"active, owner {k or '(shared)'}", v] for k, v in s["by_owner"].items()]
    rows += [[k, "-" if v is None else v] for k, v in s["extra"].items()]
    out = table(["what", "value"], rows)
    return out + (f"\n{s['note']}" if s.get("note") else "")


@main.command(name="import")
@click.argument("file", type=click.File("rb"))
@json_option
@click.pass_obj
@run
async def import_(ctx: Context, file: Any, as_json: bool) -> None:
    """Import memories from a JSONL FILE (as `export` writes it: one memory per line, then
    the maintenance log's lines).

    Every line is checked before anything is written: a bad line (or a field no export
    writes) is named and nothing is imported; a file with no memories is refused. Archived
    memories come back archived, with their tombstones, and each exported memory as its
    own, even beside another with the same text. An id that another
    owner's memory holds is imported under an id of yours derived from it, the same each
    time (importing a file again adds nothing); a line that says a shared memory again is
    that memory; a forgotten line whose memory you hold forgets it here too (`forgotten`),
    unless you revived it here since; an edge to a memory you cannot link to is not added,
    and named.
    """
    from .errors import InvalidInput
    from .services.transfer import check_records

    items = _import_lines(file)
    if not items:
        # Before the store is opened: an empty file creates no empty store.
        name = getattr(file, "name", "FILE")
        raise click.ClickException(
            f"{name}: holds no memories (it is empty, or only blank lines). Nothing was imported."
        )
    try:
        # Before the store is opened: a refused file creates no store and writes nothing.
        checked = check_records(items, ctx.settings().owner)
    except InvalidInput as exc:
        raise click.ClickException(str(exc)) from None
    if not checked.lines:
        name = getattr(file, "name", "FILE")
        raise click.ClickException(
            f"{name}: holds no memories (only maintenance log lines). Nothing was imported."
        )
    async with open_memory(ctx) as mem:
        await mem.wait_ready()
        with progress_bar(len(items), "importing") as bar:
            try:
                report = await mem.import_records(checked, tick=bar.update)
            except NooaError as exc:
                # The fields it names are the file's, not this command's flags.
                raise click.ClickException(str(exc)) from None
    widened = report.counts.get("from_other_owners", 0)
    if widened and ctx.settings().owner == "":
        # The file's owners are not configuration, but a private memory made shared here is
        # readable by every role of this store: say so, once.
        click.echo(
            f"{widened} line(s) belonged to another owner and are shared memories now, which "
            "every role reads; to keep them private, import with --owner ROLE into a new store.",
            err=True,
        )
    for sentence in report.skipped_edges[:_SHOWN_SKIPS]:
        click.echo(sentence, err=True)
    if len(report.skipped_edges) > _SHOWN_SKIPS:
        click.echo(f"... and {len(report.skipped_edges) - _SHOWN_SKIPS} more.", err=True)
    emit(report.counts, as_json, lambda c: "  ".join(f"{k}: {v}" for k, v in c.items()))


#: Edges not added that an import names on stderr (the count says how many in all).
_SHOWN_SKIPS = 20


def _import_lines(file: Any) -> list[tuple[int, Any]]:
    """(line number, decoded JSON) of each non-blank line, read a bounded line at a time.

    Raises:
        click.ClickException: a line is longer than the limit, not UTF-8 or not JSON.
    """
    from .domain.imports import MAX_LINE_BYTES

    items: list[tuple[int, Any]] = []
    n = 0
    while True:
        raw = file.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return items
        n += 1
        if len(raw) > MAX_LINE_BYTES:
            raise click.ClickException(
                f"line {n}: longer than {MAX_LINE_BYTES // 2**20} MiB, more than any exported "
                "memory. Nothing was imported."
            )
        try:
            # A byte-order mark (Windows editors write one) opens the file, not a memory.
            text = raw.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError:
            raise click.ClickException(f"line {n}: not UTF-8 text. Nothing was imported.") from None
        if not text.strip():
            continue
        try:
            items.append((n, json.loads(text)))
        except RecursionError:
            raise click.ClickException(
                f"line {n}: not JSON (nested too deeply). Nothing was imported."
            ) from None
        except ValueError as exc:  # JSONDecodeError, or an integer of thousands of digits
            if isinstance(exc, json.JSONDecodeError):
                # "Invalid control character at": the decoder's words stop where its position
                # would follow; the column says where.
                why = f"{exc.msg.removesuffix(' at')}, column {exc.colno}"
            else:
                why = str(exc).split(";")[0]
            hint = ""
            if n == 1 and text.lstrip().startswith("["):
                # What `export --json` writes: one array over many lines.
                hint = (
                    " This looks like `export --json` output (one JSON array); import reads "
                    "JSON lines, one memory per line, as `export` writes them without --json."
                )
            raise click.ClickException(
                f"line {n}: not JSON ({why}). Nothing was imported.{hint}"
            ) from None


@main.command()
@click.option(
    "--include-archived",
    is_flag=True,
    help="Also export forgotten memories (faded ones, which recall still reaches, always go).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of JSONL.")
@click.pass_obj
@run
async def export(ctx: Context, include_archived: bool, as_json: bool) -> None:
    """Export memories as JSONL on stdout (one memory per line, then your role's maintenance
    log, one entry per line), or with --json as an array: live and faded ones (what recall
    reaches), and forgotten ones with --include-archived."""
    as_array = as_json or ctx.as_json
    records = []
    written = 0
    async with open_memory(ctx, create=False) as mem:
        async for record in mem.export_records(include_archived=include_archived):
            written += 1
            if as_array:
                records.append(record)
            else:
                click.echo(json.dumps(record, ensure_ascii=False))
        # An export is a backup: one that holds nothing because every memory belongs to a
        # role this --owner does not read says so, on stderr (stdout is the file).
        hidden = "" if written else await hidden_note(mem)
    if as_array:
        click.echo(json.dumps(records, indent=2, ensure_ascii=False))
    if hidden:
        click.echo(f"Exported no memory. {hidden}", err=True)


# ------------------------------------------------------------ update, forget, revive
# The memory_update tool's changes and the facade's forget and revive, each as the CLI's
# owner: refused across roles as the tools refuse them.


def parse_links(links: tuple[str, ...]) -> list[dict[str, str]]:
    """`--link ID[:RELATION]` values as the tools' links (related unless a relation is named).

    Raises:
        click.BadParameter: a colon with no relation after it.
    """
    parts = [link.partition(":") for link in links]
    for link, (_, colon, relation) in zip(links, parts, strict=True):
        if colon and not relation.strip():
            raise click.BadParameter(
                f"'{link}' names no relation after the colon: write ID alone (related) or "
                "ID:RELATION, e.g. a1b2c3d4:refines.",
                param_hint="--link",
            )
    return [{"target": target, "relation": relation or "related"} for target, _, relation in parts]


def check_time(flag: str, value: str | None) -> None:
    """Refuse a time that is not ISO 8601, naming the flag."""
    from .domain.schema import iso_time

    if value and iso_time(value) is None:
        raise click.BadParameter(
            f"'{value}' is not an ISO 8601 time: write e.g. 2030-01-01T09:00 (local time) "
            "or 2030-01-01T09:00Z.",
            param_hint=flag,
        )


@main.command()
@click.argument("memory_id", metavar="ID")
@click.option("--content", help="The new text (replaces it; `-` reads it from stdin).")
@click.option("--title", help="The new title.")
@click.option("--importance", help="CRITICAL, HIGH, MEDIUM, LOW, TRIVIAL or 0–10 (as you rate it).")
@click.option(
    "--tag", "tags", multiple=True, help="A tag (repeatable): the tags given replace all its tags."
)
@click.option("--no-tags", is_flag=True, help="Remove all its tags.")
@click.option(
    "--valid-to",
    help="No longer true from this ISO 8601 time (local time unless Z); a past time says it "
    "has stopped holding: recall flags it stale.",
)
@click.option(
    "--link",
    "links",
    multiple=True,
    metavar="ID[:RELATION]",
    help="Link it to a memory (id or 8-char prefix): related unless a relation is named "
    "(repeatable).",
)
@json_option
@click.pass_obj
@functools.partial(run, names={**ID_ARGUMENT, "content": "--content"})
async def update(
    ctx: Context,
    memory_id: str,
    content: str | None,
    title: str | None,
    importance: str | None,
    tags: tuple[str, ...],
    no_tags: bool,
    valid_to: str | None,
    links: tuple[str, ...],
    as_json: bool,
) -> None:
    """Correct, re-rate, re-tag or link the memory ID (an id or 8-char prefix), as the
    memory_update tool does. Only what is given changes; `forget` archives it."""
    if any(not t.strip() for t in tags):
        # An empty tag was dropped, leaving no tags to replace the old ones: all were cleared.
        raise click.BadParameter(
            "an empty tag would remove all its tags: give the tags to keep, or pass --no-tags "
            "to remove them all.",
            param_hint="--tag",
        )
    if no_tags and tags:
        raise click.BadParameter(
            "--no-tags removes all its tags, and --tag gives new ones: pass one of them.",
            param_hint="--no-tags",
        )
    if (
        all(v is None for v in (content, title, importance, valid_to))
        and not tags + links
        and not no_tags
    ):
        raise click.UsageError(
            "Nothing to change: pass at least one of --content, --title, --importance, --tag, "
            "--no-tags, --valid-to or --link (to archive the memory: nooa-mcp forget ID)."
        )
    if content == "-":
        content = sys.stdin.read()
    check_time("--valid-to", valid_to)
    linked = parse_links(links)
    async with open_memory(ctx, create=False) as mem:
        result = await mem.update(
            memory_id,
            content=content,
            title=title,
            importance=importance,
            tags=[] if no_tags else list(tags) or None,
            valid_to=local_time(valid_to),
            links=linked or None,
        )
    emit(result, as_json, lambda r: with_reminders(update_text(r, "updated"), r))


def update_text(r: Any, done: str) -> str:
    """`DONE  ID` and what changed, or `unchanged  ID` (it already said that)."""
    changed = [c for c in r.changed if c not in ("archived", "revived")]
    if r.changed:
        lines = [f"{done}  {r.id}"] + ([f"changed: {', '.join(changed)}"] if changed else [])
    else:
        already = {"forgotten": "already forgotten", "revived": "not forgotten"}
        lines = [f"{already.get(done, 'unchanged')}  {r.id}"]
    if r.merged_from:
        lines.append(
            f"{r.merged_from[:8]} was merged by reflection into {r.id[:8]}: the change went there."
        )
    return "\n".join(lines)


@main.command()
@click.argument("memory_id", metavar="ID")
@click.option(
    "--reason",
    default="forgotten",
    show_default=True,
    help="Why, kept with its tombstone (the console's archive shows it).",
)
@json_option
@click.pass_obj
@run_by_id
async def forget(ctx: Context, memory_id: str, reason: str, as_json: bool) -> None:
    """Forget the memory ID (an id or 8-char prefix): archived, never deleted. Recall no
    longer reaches it, and writing the same text again is refused until `revive ID`."""
    if not reason.strip():
        raise click.BadParameter(
            "an empty reason: say why, or leave it out.", param_hint="--reason"
        )
    async with open_memory(ctx, create=False) as mem:
        result = await mem.forget(memory_id, reason=reason.strip())
    emit(result, as_json, lambda r: update_text(r, "forgotten"))


@main.command()
@click.argument("memory_id", metavar="ID")
@json_option
@click.pass_obj
@run_by_id
async def revive(ctx: Context, memory_id: str, as_json: bool) -> None:
    """Restore the forgotten memory ID (an id or 8-char prefix): that very memory, with its
    links and history; its tombstone is lifted."""
    async with open_memory(ctx, create=False) as mem:
        result = await mem.revive(memory_id)
    emit(result, as_json, lambda r: update_text(r, "revived"))


@main.command(name="list")
@click.option("--type", "type_", help="Only this type (info, skill, episode, intent, todo, ...).")
@click.option("--by", "by", help="Only memories of this owner (role@instance), or (shared).")
@click.option("--tag", help="Only memories carrying this tag.")
@click.option(
    "--state",
    type=click.Choice(["live", "archived", "all"]),
    default="live",
    show_default=True,
    help="Live memories, archived ones (faded by reflection, or forgotten), or both.",
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@click.option("--after", type=click.IntRange(0, 2**63 - 1), help="Continue after this cursor.")
@json_option
@click.pass_obj
@run
async def list_(
    ctx: Context,
    type_: str | None,
    by: str | None,
    tag: str | None,
    state: str,
    limit: int,
    after: int | None,
    as_json: bool,
) -> None:
    """List memories in the order they were written, with their ids (the console's filters).

    Nothing is logged and no reminder fires: looking is not recalling.
    """
    from .domain.schema import MemoryType

    if type_ is not None and type_ not in {t.value for t in MemoryType}:
        raise click.BadParameter(
            f"'{type_}' is not a memory type: use {', '.join(t.value for t in MemoryType)}.",
            param_hint="--type",
        )
    owner = None if by is None else ("" if by == "(shared)" else by)
    archived = {"live": False, "archived": True, "all": None}[state]
    async with open_memory(ctx, create=False) as mem:
        rows = await mem.list_memories(
            type=type_, owner=owner, tag=tag, archived=archived, after=after, limit=limit + 1
        )
        hidden = "" if rows or any((type_, by, tag, after)) else await hidden_note(mem)
    more = rows[limit - 1][0] if len(rows) > limit else None
    shown = rows[:limit]
    if as_json or ctx.as_json:
        out: dict[str, Any] = {
            "memories": [{"cursor": n, **v.model_dump(mode="json")} for n, v in shown],
            "next_after": more,
        }
        click.echo(json.dumps(out, indent=2, ensure_ascii=False, default=str))
        return
    if not shown:
        click.echo("\n".join(filter(None, ["No memories match.", hidden])))
        return
    lines = table(
        ["id", "type", "owner", "state", "imp", "tags", "created", "memory"],
        [
            [
                v.id[:8],
                v.type.value,
                v.owner or "(shared)",
                _list_state(v),
                v.importance_label,
                ",".join(v.tags)[:24],
                f"{v.created_at:%Y-%m-%d}",
                (v.title or v.content)[:60].replace("\n", " "),
            ]
            for _, v in shown
        ],
    )
    if more is not None:
        lines += f"\nMore: nooa-mcp list --after {more} (with the same filters)."
    click.echo(lines)


def _list_state(view: Any) -> str:
    """The state column: faded (archived by reflection: recall still reaches it) or forgotten
    (by its user), superseded (by the memory recall ranks it below), stale (its validity
    ended: recall flags it so), a todo's status, an
    intent's trigger (a one-shot intent that fired is still live, but will not fire again; a
    recurring one stays armed), or live."""
    if view.archived:
        return "faded" if view.flags.faded else "forgotten"
    if view.flags.superseded_by:
        return f"superseded by {view.flags.superseded_by[:8]}"
    if view.flags.stale and view.valid_to is not None:
        # Its --valid-to has passed: recall flags it stale and ranks it lower.
        return f"stale since {view.valid_to:%Y-%m-%d}"
    if view.status:
        return view.status
    trigger = view.trigger or {}
    fired = trigger.get("fired_count") or 0
    if view.type.value == "intent" and fired:
        # A recurring one fires again: it is armed, however often it fired.
        return f"armed, fired {fired}x" if trigger.get("every_hours") else "fired"
    return "live"


# ------------------------------------------------------------------- todo, intent
# The `todo` and `intent` tools' actions, as the person at the terminal: the CLI's owner
# (--owner, or shared without it). A shared todo or intent is the user's to close, so the CLI
# without --owner closes it as the console without one does; with --owner the facade refuses
# it as it refuses that role over MCP. Looking and closing fire no reminder (a person's
# command is not the agent's turn, as in the console); `intent check` is the one that fires.

importance_option = click.option(
    "--importance", help="CRITICAL, HIGH, MEDIUM (a new memory's default), LOW, TRIVIAL or 0–10."
)


@main.group()
def todo() -> None:
    """List, add, close (done, drop) or reopen todos, as the `todo` tool does.

    Without --owner these are the shared todos, the user's: closing one here is the user
    closing it (a role, --owner ROLE, is refused a shared todo as it is over MCP).
    """


@todo.command(name="list")
@click.option(
    "--status",
    type=click.Choice(["open", "done", "dropped", "all"]),
    default="open",
    show_default=True,
    help="Which todos to list.",
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@json_option
@click.pass_obj
@run
async def todo_list(ctx: Context, status: str, limit: int, as_json: bool) -> None:
    """List todos: open ones first, then by importance, then oldest first. Fires nothing."""
    async with open_memory(ctx, create=False) as mem:
        result = await mem.todo("list", status=status, limit=limit, remind=False)
    emit(result, as_json, _render_todos)


@todo.command(name="add")
@click.argument("text")
@click.option("--title", default="")
@importance_option
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@json_option
@click.pass_obj
@run
async def todo_add(
    ctx: Context,
    text: str,
    title: str,
    importance: str | None,
    tags: tuple[str, ...],
    as_json: bool,
) -> None:
    """Add the todo TEXT (`-` reads it from stdin); open todos are never pruned."""
    if text == "-":
        text = sys.stdin.read()
    async with open_memory(ctx) as mem:
        result = await mem.todo(
            "add", content=text, title=title, importance=importance, tags=list(tags) or None
        )
    emit(result, as_json, _render_todos)


def _close_todo(action: str, doc: str) -> None:
    @todo.command(name=action, help=doc)
    @click.argument("memory_id", metavar="ID")
    @json_option
    @click.pass_obj
    @run_by_id
    async def close(ctx: Context, memory_id: str, as_json: bool) -> None:
        async with open_memory(ctx, create=False) as mem:
            result = await mem.todo(action, memory_id=memory_id, remind=False)
        emit(result, as_json, _render_todos)


_close_todo("done", "Mark the todo ID (an id or 8-char prefix) done.")
_close_todo("drop", "Drop the todo ID (an id or 8-char prefix): it will not be done.")
_close_todo("reopen", "Reopen the done or dropped todo ID (an id or 8-char prefix).")


def _render_todos(r: Any) -> str:
    lines = [] if r.action == "list" else [f"{r.outcome}  {r.id}"]
    if r.action == "list":
        if r.todos:
            lines.append(
                table(
                    ["id", "status", "imp", "created", "todo"],
                    [
                        [
                            t.id8,
                            t.status,
                            t.importance_label,
                            f"{t.created_at:%Y-%m-%d}",
                            (t.title or t.content)[:60].replace("\n", " ")
                            # Listed to this role, closed only by the user (CLI without --owner)
                            + (" (shared: the user closes it)" if t.shared else ""),
                        ]
                        for t in r.todos
                    ],
                )
            )
        else:
            lines.append("No todos." if r.status == "all" else f"No {r.status} todos.")
    if not (r.action == "list" and r.status == "open" and not r.todos):
        lines.append(f"{r.open_count} open.")  # "No open todos." said it already
    return with_reminders("\n".join(lines), r)


@main.group()
def intent() -> None:
    """List, add, cancel or check intents (reminders), as the `intent` tool does.

    Without --owner these are the shared intents, the user's: cancelling one here is the user
    cancelling it (a role, --owner ROLE, is refused a shared intent as it is over MCP).
    """


@intent.command(name="list")
@json_option
@click.pass_obj
@run
async def intent_list(ctx: Context, as_json: bool) -> None:
    """List the intents and their triggers. Fires nothing (`intent check` does)."""
    async with open_memory(ctx, create=False) as mem:
        result = await mem.intent("list", remind=False)
    emit(result, as_json, _render_intents)


@intent.command(name="add")
@click.argument("text")
@click.option(
    "--fire-at",
    help="Fire once this ISO 8601 time has passed (this machine's local time unless it ends "
    "in Z or an offset).",
)
@click.option("--cue", help="Fire when these words (or their gist) come up.")
@click.option(
    "--every-hours", type=float, help="Re-arm this many hours after each firing (recurring)."
)
@importance_option
@json_option
@click.pass_obj
@run
async def intent_add(
    ctx: Context,
    text: str,
    fire_at: str | None,
    cue: str | None,
    every_hours: float | None,
    importance: str | None,
    as_json: bool,
) -> None:
    """Add an intent: do TEXT at --fire-at, on --cue, or whichever comes first.

    Like `author --type intent`: its text cues the intents already armed, and one it fires
    is shown under the reply.
    """
    check_time("--fire-at", fire_at)
    async with open_memory(ctx) as mem:
        result = await mem.intent(
            "add",
            content=text,
            fire_at=local_time(fire_at),
            cue=cue,
            every_hours=every_hours,
            importance=importance,
        )
    emit(result, as_json, _render_intents)


@intent.command(name="cancel")
@click.argument("memory_id", metavar="ID")
@json_option
@click.pass_obj
@run_by_id
async def intent_cancel(ctx: Context, memory_id: str, as_json: bool) -> None:
    """Cancel the intent ID (an id or 8-char prefix): it never fires again."""
    async with open_memory(ctx, create=False) as mem:
        result = await mem.intent("cancel", memory_id=memory_id, remind=False)
    emit(result, as_json, _render_intents)


@intent.command(name="check")
@click.option("--text", help="What is going on: cues are checked against it.")
@json_option
@click.pass_obj
@run
async def intent_check(ctx: Context, text: str | None, as_json: bool) -> None:
    """Fire the intents due now (times passed; cues, against --text) and show them."""
    async with open_memory(ctx, create=False) as mem:
        if text:
            await mem.wait_ready()
        result = await mem.intent("check", text=text)
    emit(result, as_json, _render_intents)


def _render_intents(r: Any) -> str:
    if r.action == "list":
        if not r.intents:
            return "No intents."
        rows = [
            [
                i.id8,
                ("armed" if i.armed else "fired")
                + (f", fired {i.fired_count}x" if i.armed and i.fired_count else ""),
                f"{i.fire_at:%Y-%m-%d %H:%M}Z" if i.fire_at else "",
                i.cue or "",
                "" if i.every_hours is None else f"{i.every_hours:g}",
                i.content[:60].replace("\n", " "),
            ]
            for i in r.intents
        ]
        return table(["id", "state", "fire at", "cue", "every h", "intent"], rows)
    if r.action == "check":
        return with_reminders(r.outcome, r)
    # "created (fire_at … has passed: …)": the status beside the id, the note under it.
    status, _, note = r.outcome.partition(" (")
    lines = [f"{status}  {r.id}"]
    if note:
        lines.append(note.removesuffix(")").replace("fire_at", "--fire-at", 1) + ".")
    return with_reminders("\n".join(lines), r)


# ---------------------------------------------------------------------------- reflect


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

    Without --owner the pass covers every role's memories (each within its role); with it,
    that role's. Each item is committed on its own, so Ctrl-C leaves a consistent store and
    the next run picks up where this one stopped. Reconcile and abstract need a client's
    model (MCP sampling) and are skipped here.
    """
    async with open_memory(ctx) as mem:
        with progress_bar(1, "reflecting", show_pos=True, item_show_func=lambda item: item) as bar:

            async def progress(done: int, total: int, message: str) -> None:
                bar.length = max(total, done, 1)
                bar.update(done - bar.pos, current_item=message)

            report = await mem.reflect(list(steps) or None, progress=progress)
    emit(report, as_json, _render_reflect)


def _render_reflect(r: Any) -> str:
    rows = [[s.step, s.planned, s.applied, s.skipped, s.failed, s.note] for s in r.steps]
    seconds = (r.finished_at - r.started_at).total_seconds() if r.finished_at else 0.0
    lines = [table(["step", "planned", "applied", "skipped", "failed", "note"], rows)]
    for s in r.steps:
        shown, more = s.outcomes()
        lines += [f"{s.step}: {d}" for d in shown]
        if more:
            where = " (`list --state archived` lists what faded)" if s.step == "prune" else ""
            lines.append(f"{s.step}: … and {more} more{where}")
    return "\n".join([*lines, f"{r.status}: {r.applied} changes in {seconds:.1f} s"])


# --------------------------------------------------------------------------- hooks
# Claude Code hooks. `nooa-mcp hook ...` is normally answered by nooa_mcp/__main__.py before
# this module is imported; these commands are the same code for --help and for other callers.

url_option = click.option(
    "--url",
    envvar="NOOA_URL",
    help="A running `nooa-mcp serve --transport http` to ask first (env NOOA_URL; its bearer "
    "token in NOOA_TOKEN).",
)
deadline_option = click.option(
    "--deadline",
    envvar="NOOA_HOOK_SECONDS",
    help="Seconds the whole hook may take (connect, every query, a server's answer); past "
    "them it prints nothing (env NOOA_HOOK_SECONDS; default 2).",
)


@main.group()
def hook() -> None:
    """Answer a Claude Code hook: its JSON on stdin, the context to inject on stdout.

    Never fails the prompt: any problem prints nothing, exits 0 and leaves a line in
    <user data dir>/nooa-mcp/hooks.log.
    """


def _hook(ctx: Context, event: str, url: str | None, deadline: str | None) -> None:
    from .hooks.run import run

    store = str(ctx.store) if ctx.store is not None else None
    run(
        event,
        store=store,
        owner=ctx.owner,
        url=url,
        deadline=deadline,
        stdin=sys.stdin,
        stdout=sys.stdout,
    )


@hook.command(name="session-start")
@url_option
@deadline_option
@click.pass_obj
def hook_session_start(ctx: Context, url: str | None, deadline: str | None) -> None:
    """SessionStart: open todos, due intents, the project's most important memories."""
    _hook(ctx, "session-start", url, deadline)


@hook.command(name="user-prompt")
@url_option
@deadline_option
@click.pass_obj
def hook_user_prompt(ctx: Context, url: str | None, deadline: str | None) -> None:
    """UserPromptSubmit: the intents the prompt cues and the memories relevant to it."""
    _hook(ctx, "user-prompt", url, deadline)


@main.group()
def hooks() -> None:
    """Install or remove nooa's hooks in Claude Code's settings file."""


scope_option = click.option(
    "--scope",
    type=click.Choice(["user", "project", "local"]),
    default="user",
    show_default=True,
    help="user: ~/.claude/settings.json; project: .claude/settings.json (shared); "
    "local: .claude/settings.local.json.",
)
settings_option = click.option(
    "--settings",
    "settings_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write this settings file instead of the scope's.",
)
dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Print the change as a diff; write nothing."
)


def _apply(path: Path, wanted: Any, dry_run: bool, done: str) -> None:
    from .hooks.install import InstallError, apply

    try:
        changed, diff = apply(path, wanted, dry_run=dry_run)
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    if dry_run:
        click.echo(diff if changed else f"No change to {path}.", nl=not changed)
    else:
        click.echo(f"{done} {path}." if changed else f"No change to {path}.")


@hooks.command(name="install")
@scope_option
@settings_option
@dry_run_option
@click.option(
    "--command",
    "command",
    help="How Claude Code runs nooa-mcp (default: this installation's path; `nooa-mcp` for "
    "--scope project).",
)
@click.option(
    "--url",
    help="Ask this running `nooa-mcp serve --transport http` first (the token in NOOA_TOKEN).",
)
@click.option(
    "--http",
    "http",
    is_flag=True,
    help="Write http hooks that Claude Code posts to --url itself (no process per prompt).",
)
@click.option(
    "--token-env",
    help="With --http: the environment variable holding the bearer token (e.g. NOOA_TOKEN).",
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=0, min_open=True, max=3600),
    help="Seconds the hook may take in all (default 2); e.g. 5 for a PostgreSQL store "
    "without a server.",
)
@click.pass_obj
def hooks_install(
    ctx: Context,
    scope: str,
    settings_file: Path | None,
    dry_run: bool,
    command: str | None,
    url: str | None,
    http: bool,
    token_env: str | None,
    deadline: float | None,
) -> None:
    """Add the SessionStart and UserPromptSubmit hooks (merged; other hooks are kept)."""
    from .hooks.install import InstallError, default_command, handlers, settings_path

    try:
        wanted = handlers(
            command=command or default_command(scope),
            owner=ctx.owner,
            store=str(ctx.store) if ctx.store is not None else None,
            url=url,
            http=http,
            token_env=token_env,
            deadline=deadline,
        )
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    _apply(settings_file or settings_path(scope), wanted, dry_run, "Installed nooa's hooks in")


@hooks.command(name="uninstall")
@scope_option
@settings_option
@dry_run_option
def hooks_uninstall(scope: str, settings_file: Path | None, dry_run: bool) -> None:
    """Remove nooa's hooks (and nothing else) from Claude Code's settings file."""
    from .hooks.install import settings_path

    _apply(settings_file or settings_path(scope), None, dry_run, "Removed nooa's hooks from")


@hooks.command(name="trust")
@click.argument("path", required=False)
@click.option("--remove", is_flag=True, help="Take PATH off the list.")
def hooks_trust(path: str | None, remove: bool) -> None:
    """Let the hooks read a project's own store (PATH: the store file, or the project folder
    for its .nooa/memory.sqlite). Without PATH, list the trusted stores.

    A hook never reads a .nooa/memory.sqlite it finds in a project unless it is on this list
    (or given with --store / NOOA_STORE): a cloned repository can ship one.
    """
    from .hooks import paths

    if path is None:
        if remove:
            raise click.UsageError("--remove needs the PATH to take off the list.")
        entries = paths.trusted_stores()
        click.echo(
            "\n".join(entries) if entries else f"No trusted project stores ({paths.trust_file()})."
        )
        return
    if (scheme := url_scheme(path)) is not None:
        # Taken as a path, "postgresql://…" was trusted as "<cwd>/postgresql:/…".
        raise click.UsageError(
            f"PATH is a store URL ({scheme}://…); the list holds project "
            "store files. A store a hook should always read is given to it: hooks install "
            "--store URL (or NOOA_STORE)."
        )
    try:
        target, changed = paths.set_trusted(path, not remove)
    except OSError as exc:
        raise click.ClickException(
            f"cannot write {paths.trust_file()} ({exc.strerror}); nothing was changed."
        ) from None
    if remove:
        click.echo(f"No longer trusted: {target}." if changed else f"{target} was not trusted.")
    else:
        yet = "" if Path(target).exists() else " (nothing there yet: read once written)"
        click.echo(f"Trusted: {target}{yet}." if changed else f"{target} was already trusted.")


# ------------------------------------------------------------------------ migrate
# The copying between backends lives in nooa_mcp/storage/migrate.py.


@main.command()
@click.argument("source")
@click.argument("dest")
@json_option
@run
async def migrate(source: str, dest: str, as_json: bool) -> None:
    """Copy the store SOURCE into the new, empty store DEST, losslessly.

    Each is a store file or a postgresql:// URL, so this moves a store between SQLite and
    PostgreSQL (either way): memories with every field and embedding, edges, the access
    stream, tombstones, todos, intents, the maintenance log and settings. DEST is written in
    one transaction: it gets everything or nothing, and the copy runs again when a server
    wrote to SOURCE while it was read.
    """
    from .config import store_target
    from .storage.migrate import migrate as copy

    bar: Any = None
    with contextlib.ExitStack() as stack:

        def sized(sizes: dict[str, int]) -> None:
            nonlocal bar
            bar = stack.enter_context(
                progress_bar(
                    max(1, sum(sizes.values())),
                    "copying",
                    show_pos=True,
                    item_show_func=lambda table: table,
                )
            )

        def progress(table: str, rows: int) -> None:
            bar.update(rows, current_item=table)

        report = await copy(store_target(source), store_target(dest), progress, sized)
    for line in report.replaced:
        click.echo(f"copied changed: {line}", err=True)
    if report.replaced:
        click.echo(
            f"{len(report.replaced)} row(s) were copied with a NUL character replaced by U+FFFD "
            "(listed above); everything else was copied as it was.",
            err=True,
        )
    emit(
        {"copied": report.copied, "dest": report.dest_sizes, "replaced": report.replaced},
        as_json,
        lambda r: table(
            ["table", "copied", "in DEST"],
            [[t, n, r["dest"].get(t, "")] for t, n in r["copied"].items()],
        ),
    )


# --------------------------------------------------------------------------- eval
# The `eval` group lives in nooa_mcp/evaluation/cli.py.
from .evaluation.cli import eval_group  # noqa: E402

main.add_command(eval_group)


# --------------------------------------------------------------------------- ui
# The web front end lives in nooa_mcp/console/.


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option(
    "--port", default=8766, show_default=True, type=click.IntRange(0, 65535), help="Port."
)
@tokens_option("JSON file mapping token → owner: sign in with a token instead of --owner.")
@allow_host_option
@click.pass_obj
def ui(
    ctx: Context, host: str, port: int, tokens_file: Path | None, allow_host: tuple[str, ...]
) -> None:
    """Serve the memory console in a browser (loopback only without --tokens)."""
    import contextlib

    from .console.serve import serve as serve_console
    from .mcp.identity import load_tokens

    settings = _with_hosts(ctx.settings(), allow_host)
    must_exist(settings.store, SERVES_ONE)
    if tokens_file is not None:  # a file: reference under the root must not read it back
        settings = settings.model_copy(
            update={"private_files": [*settings.private_files, tokens_file]}
        )

    async def body() -> None:
        # Opening a PostgreSQL schema creates it: a typo must not serve a new, empty store.
        await must_hold_store(settings.store, SERVES_ONE)
        tokens = load_tokens(tokens_file) if tokens_file else None
        if tokens and settings.owner:
            raise click.ClickException(
                "--owner and --tokens both name an owner: with a tokens file each token is its "
                "own owner, so leave out --owner (or NOOA_OWNER)."
            )
        if tokens and settings.read:
            raise click.ClickException(
                f"--read/NOOA_READ ({','.join(settings.read)}) does not apply with --tokens: "
                "each token reads what its own entry's read list grants, so leave out --read "
                "(or NOOA_READ)."
            )
        await serve_console(settings, host=host, port=port, tokens=tokens, announce=click.echo)

    # uvicorn re-raises the Ctrl-C it caught once it has shut down cleanly.
    with contextlib.suppress(KeyboardInterrupt):
        run(body)()
