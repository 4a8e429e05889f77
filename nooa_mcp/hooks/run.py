"""`nooa-mcp hook session-start|user-prompt`: Claude Code's hook JSON in, hook output out.

A hook runs before every prompt, so it must never block or break it: whatever happens — bad
input, a locked or missing store, a server that does not answer — it prints either a valid
hook output or nothing, exits 0, and a failure leaves one line in `<user data dir>/nooa-mcp/
hooks.log`. One deadline covers the whole hook (`--deadline SECONDS` or `NOOA_HOOK_SECONDS`,
default 2 s): SQLite queries past it are interrupted, PostgreSQL gets `connect_timeout` and
`statement_timeout` from what is left of it, a server's answer must have arrived by then (not
merely kept trickling). As the console script runs it, a watchdog thread ends the process at
the deadline whatever it is waiting on: it prints nothing, exits 0 and logs one line. Ending
mid-write is safe: SQLite rolls back an unfinished transaction, and PostgreSQL aborts one whose
connection closed (docs/DESIGN.md §12).

Paths, in order: a running server when one is configured (`--url` or `NOOA_URL`; the token in
`NOOA_TOKEN`), which gives recall with the model; else the keyword path on the SQLite file
(`hooks/local.py`); a PostgreSQL store without a server goes through the Memory facade without
the model (slower: a fresh process imports the whole package).

The owner comes from `--owner`/`NOOA_OWNER`, else it is `claude-code` (the name Claude Code
gives MCP servers, so hook and MCP server agree without configuration); never from the hook
JSON. With a server, the server's owner rules apply (the token's owner, or its `--owner`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from datetime import UTC, datetime

from ..domain.text import holds_unstorable, without_unstorable
from . import paths

__all__ = [
    "DEFAULT_OWNER",
    "DEFAULT_SECONDS",
    "EVENTS",
    "TEXT_FIELDS",
    "hard_deadline",
    "not_text",
    "output",
    "run",
]

#: Command name → Claude Code's hook event name.
EVENTS = {"session-start": "SessionStart", "user-prompt": "UserPromptSubmit"}
#: The owner of a hook without --owner/NOOA_OWNER: Claude Code's MCP client name, slugged.
DEFAULT_OWNER = "claude-code"
#: The hook input is a few kilobytes; a prompt pasted with a whole file is cut here.
MAX_INPUT = 1024 * 1024
MAX_LOG = 1024 * 1024
#: The whole hook's deadline unless --deadline or NOOA_HOOK_SECONDS says otherwise.
DEFAULT_SECONDS = 2.0
#: What a cooperative timeout (a query, a socket) keeps back from the deadline, so it reports
#: its own cause before the watchdog fires.
MARGIN = 0.15
#: domain.scope's owner alphabet (checked equal by the tests; that module costs a fresh
#: process the dataclasses import).
_OWNER_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$")


class HookFailed(Exception):
    """Something the log should say in one line."""


def output(event: str, text: str) -> str:
    """Claude Code's hook output for `text`; "" (no output at all) when there is nothing."""
    if not text:
        return ""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": text}},
        ensure_ascii=False,
    )


def _owner(value: str | None) -> str:
    owner = (value or "").strip() or DEFAULT_OWNER
    role, at, instance = owner.partition("@")
    if not _OWNER_PART.fullmatch(role) or (at and not _OWNER_PART.fullmatch(instance)):
        raise HookFailed(f"owner {owner!r} is not role[@instance] in ASCII letters and digits")
    return owner


def _payload(raw: str) -> dict:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HookFailed(f"the hook input is not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise HookFailed("the hook input is not a JSON object")
    return storable_input(data)


def storable_input(data: dict) -> dict:
    """The hook input with each NUL and lone surrogate (a `\\ud800` escape decodes to one) as
    U+FFFD: a hook never breaks a prompt, and no store or UTF-8 output takes either (the HTTP
    route answered 500 to one in a prompt, a cwd or a session id)."""
    return without_unstorable(data) if holds_unstorable(data) else data


#: The hook input's text fields (Claude Code's JSON).
TEXT_FIELDS = ("prompt", "cwd", "session_id")


def not_text(data: dict, keys: tuple[str, ...] = TEXT_FIELDS) -> str | None:
    """What is wrong with the first of `keys` the hook input gives as something other than
    text, or None: a prompt of 5 was read as empty, and the hook printed and logged nothing.
    The command hook and the HTTP route both refuse it with this sentence."""
    for key in keys:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            return f"the hook input's {key!r} is {type(value).__name__}, not text"
    return None


def _text(data: dict, key: str) -> str:
    """A text field of the hook input, "" when absent; any other value is refused (and so
    logged, `not_text`)."""
    problem = not_text(data, (key,))
    if problem is not None:
        raise HookFailed(problem)
    return data.get(key) or ""


def _read(stream) -> str:
    if stream is None or stream.isatty():
        return ""  # run by hand in a terminal: nothing is piped, nothing to wait for
    return stream.read(MAX_INPUT)


def log(event: str, message: str) -> None:
    """Append one line to the hook log; logging never fails the hook."""
    try:
        path = paths.log_file()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path) and os.path.getsize(path) > MAX_LOG:
            os.replace(path, path + ".1")
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{stamp} {event} {' '.join(message.split())}\n")
    except OSError:
        pass


def _store(explicit: str | None, root: str) -> str:
    """The store this hook reads: the configured one, a trusted project store, or the default.

    Raises:
        HookFailed: the project holds a store the user never configured. A cloned repository
            can ship `.nooa/memory.sqlite` with rows written to steer the model, so such a file
            is neither read nor written, and the default store is not used in its place either
            (the user would not see why the project's memory is missing).
    """
    if explicit:
        return os.path.expanduser(explicit)
    if root:
        own = os.path.join(root, paths.PROJECT_STORE)
        if os.path.lexists(own):
            # A store trusted for one project, reached through a link a checkout shipped,
            # is not this project's: the list names where a store lies, not what leads to it.
            real = os.path.realpath(own)
            if real != os.path.join(os.path.realpath(root), paths.PROJECT_STORE):
                raise HookFailed(
                    f"{own} links to {real} (a checkout can ship a link to a store you trusted "
                    f"for another project), so it was not read; to use that store here, pass "
                    f"--store {real}"
                )
            if not paths.is_trusted(own):
                raise HookFailed(
                    f"{own} is a project store you have not configured (a checkout can ship "
                    "one), so it was not read; to use it, run `nooa-mcp hooks trust "
                    f"{own}` or pass --store"
                )
            return own
    return paths.default_store()


def _full(
    event: str,
    target: str,
    owner: str,
    project: str,
    prompt: str,
    session: str | None,
    deadline: float,
) -> str:
    """Inject through the full store code (PostgreSQL, or SQLite of another schema)."""
    from .facade import inject

    try:
        return inject(event, target, owner, project, prompt, session, deadline)
    except TimeoutError:
        raise HookFailed(f"the store {_shown(target)} did not answer before the deadline") from None


def _shown(target: str) -> str:
    """A store for the log: a PostgreSQL URL without its password."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", target)


def answer(
    event: str,
    data: dict,
    *,
    store: str | None = None,
    owner: str | None = None,
    url: str | None = None,
    token: str | None = None,
    deadline: float,
) -> str:
    """The hook output for one event (may raise; `run` turns failures into no output)."""
    owner = _owner(owner)
    session = _text(data, "session_id")[:200] or None
    failed = ""  # why the server did not answer, logged naming the store that did
    if url:
        from .remote import PROJECT_FIELD, RemoteFailed, ask

        # The event is the command's, whatever the input says: the server answers that one.
        # The project is found here, on the disk the cwd is on (the server never looks).
        _, project = paths.find_project(_text(data, "cwd"))
        sent = {**data, "hook_event_name": EVENTS[event], PROJECT_FIELD: project}
        body = json.dumps(sent).encode()
        # The server gets the budget but a reserve, so the store can still answer without it.
        left = deadline - time.monotonic()
        try:
            context = ask(url, body, token, left - min(0.5, left / 3))
        except RemoteFailed as exc:
            # The keyword path still gives something; the log says why the server did not.
            failed = str(exc)
        else:
            from ..domain.injection import bound_context

            # Only the context, under the local bounds, in this hook's own output.
            return output(event, bound_context(context))
    root, project = paths.find_project(_text(data, "cwd"))
    try:
        target = _store(store, root)
    except HookFailed:
        if failed:
            log(event, f"server: {failed}")
        raise
    if failed:
        from ..hosts import shown_store

        log(event, f"server: {failed} Answered from the store {shown_store(target)} without it.")
    prompt = _text(data, "prompt")
    if event == "user-prompt" and not prompt.strip():
        return ""
    if target.startswith(("postgresql://", "postgres://")):
        return output(event, _full(event, target, owner, project, prompt, session, deadline))
    if os.path.isdir(target):
        raise HookFailed(f"the store {target} is a directory; point --store at a file")
    from ..storage.quick import QuickStore, QuickUnavailable

    busy = max(50, int((deadline - time.monotonic()) * 800))
    try:
        opened = QuickStore.open(target, deadline, busy)
    except QuickUnavailable as exc:
        if not exc.older:
            raise HookFailed(str(exc).rstrip(".")) from None
        log(event, f"{exc} Answered through the full store code, which migrates it.")
        return output(event, _full(event, target, owner, project, prompt, session, deadline))
    if opened is None:
        return ""  # no store yet: nothing to remember
    from . import local

    try:
        if event == "session-start":
            text = local.session_context(opened, owner, project, session)
        else:
            text = local.prompt_context(opened, owner, prompt, session)
    finally:
        opened.close()
    return output(event, text)


#: Set by the console script (`hard_deadline`): end the process at the deadline.
_HARD = False


def hard_deadline() -> None:
    """Make `run` end this process at its deadline, whatever it is waiting on.

    Only for a process that exists to answer one hook (the console script): `os._exit` ends
    it without unwinding, which a library caller (a test, a server) must never get.
    """
    global _HARD
    _HARD = True


def seconds(value: str | float | None) -> float:
    """The hook's deadline in seconds from --deadline / NOOA_HOOK_SECONDS (default 2 s).

    Raises:
        HookFailed: the value is not a positive number of seconds.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_SECONDS
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number <= 3600:  # NaN fails too
        raise HookFailed(
            f"the hook deadline {value!r} (--deadline / NOOA_HOOK_SECONDS) is not a number of "
            "seconds between 0 and 3600; fix it in the hook command"
        )
    return number


class _Watchdog:
    """Ends the process at the deadline unless the hook finished first (one log line)."""

    def __init__(self, event: str, deadline: float, limit: float) -> None:
        self.lock = threading.Lock()
        self.finished = False
        self.event, self.limit = event, limit
        self.timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        with self.lock:
            if self.finished:
                return
            log(self.event, f"gave up at the {self.limit:g} s deadline; printed nothing.")
            os._exit(0)

    def finish(self) -> None:
        """The hook is done (answered or failed): from here the watchdog does nothing."""
        with self.lock:
            self.finished = True
        self.timer.cancel()


def run(
    event: str,
    *,
    store: str | None = None,
    owner: str | None = None,
    url: str | None = None,
    deadline: str | float | None = None,
    stdin=None,
    stdout=None,
) -> int:
    """Answer one hook: read stdin, print the output (or nothing), return 0 whatever happens.

    `deadline` is the whole hook's time in seconds (else NOOA_HOOK_SECONDS, else 2 s).
    """
    started = time.monotonic()
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    env = os.environ
    text = ""
    watchdog = None
    try:
        try:
            limit = seconds(deadline if deadline is not None else env.get("NOOA_HOOK_SECONDS"))
        except HookFailed as exc:
            log(event, f"{exc}; used {DEFAULT_SECONDS:g} s.")
            limit = DEFAULT_SECONDS
        if _HARD:
            watchdog = _Watchdog(event, started + limit, limit)
        if event not in EVENTS:
            raise HookFailed(f"{event!r} is not a hook; use session-start or user-prompt")
        raw = _read(stdin)
        text = answer(
            event,
            _payload(raw),
            store=store or env.get("NOOA_STORE") or None,
            owner=owner or env.get("NOOA_OWNER") or None,
            url=url or env.get("NOOA_URL") or None,
            token=env.get("NOOA_TOKEN") or None,
            deadline=started + limit - min(MARGIN, limit / 4),
        )
    except HookFailed as exc:
        _finish(watchdog)
        log(event, f"{exc}.")
    except Exception as exc:  # never break the user's prompt: log it, print nothing
        _finish(watchdog)
        log(event, f"{type(exc).__name__}: {exc}")
        text = ""
    _finish(watchdog)
    if text:
        stdout.write(text + "\n")
        stdout.flush()
    return 0


def _finish(watchdog: _Watchdog | None) -> None:
    if watchdog is not None:
        watchdog.finish()
