"""The HTTP transport's hook route (`POST /hooks`): Claude Code `"type": "http"` hooks and the
command hook's `--url` answered by a running server, with the same tokens and owner rules."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn
from hooks_support import hook_env, log_lines, open_memory, recorded, run_hook
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.engine import Engine
from nooa_mcp.hooks.http import hook_route
from nooa_mcp.hooks.remote import _unchunk, hook_url
from nooa_mcp.hosts import server_config
from nooa_mcp.mcp.identity import TokenFileVerifier

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"
TOKENS = {ALICE: "alice@laptop", "bob-token-0123456789abcdef00": "bob"}
WIFI = "The office Wi-Fi password is written on the whiteboard in the kitchen"
WIFI_PROMPT = "How can I get onto the wireless network at work?"


@asynccontextmanager
async def hook_app(
    store: Path, embedder=None, *, owner: str = "", tokens: dict | None = None
) -> AsyncIterator[Starlette]:
    """The route as `serve --transport http` mounts it: beside the SDK's app-wide bearer auth
    (AuthenticationMiddleware), over the server's one engine."""
    async with Engine.open(Settings(store=store), embedder or HashEmbedder()) as engine:
        middleware = []
        if tokens:
            backend = BearerAuthBackend(TokenFileVerifier(tokens))
            middleware = [Middleware(AuthenticationMiddleware, backend=backend)]
        route = hook_route(lambda: engine, owner=owner, tokens=bool(tokens))
        yield Starlette(routes=[route], middleware=middleware)


@asynccontextmanager
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
        yield c


async def post(c: httpx.AsyncClient, payload: dict | bytes, **headers: str) -> httpx.Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", **headers}
    return await c.post("/hooks", content=body, headers=headers)


def context(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    if not response.content:
        return ""
    return response.json()["hookSpecificOutput"]["additionalContext"]


async def remember(store: Path, owner: str, *texts: str, todo: str | None = None) -> None:
    async with open_memory(store, owner) as mem:
        for text in texts:
            await mem.author(text)
        if todo:
            await mem.todo("add", content=todo)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "billing"
    (root / ".git").mkdir(parents=True)
    return root


# --------------------------------------------------------------------------- what it answers


@pytest.mark.real_model
async def test_the_server_path_injects_by_meaning_what_the_keyword_path_cannot(
    tmp_path: Path, project: Path, minilm
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "claude-code", WIFI, "Lunch orders are due by 11am on Fridays")
    async with hook_app(store, minilm) as app, client(app) as c:
        served = context(await post(c, recorded("user_prompt", project, prompt=WIFI_PROMPT)))
    assert "Wi-Fi password" in served and "Lunch" not in served
    payload = recorded("user_prompt", project, prompt=WIFI_PROMPT)
    keywords = await anyio.to_thread.run_sync(
        lambda: run_hook("user-prompt", payload, hook_env(tmp_path), "--store", str(store))
    )
    assert keywords.context == ""  # no shared word: only meaning relates them


async def test_session_start_through_the_route_shows_todos_and_logs_them_injected(
    tmp_path: Path, project: Path
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "claude-code", todo="Renew the TLS certificate")
    async with hook_app(store) as app, client(app) as c:
        response = await post(c, recorded("session_start", project))
    assert response.headers["content-type"] == "application/json"
    output = response.json()["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    assert "Renew the TLS certificate" in output["additionalContext"]
    async with open_memory(store, "claude-code") as mem:
        todo = (await mem.todo("list")).todos[0]
        newest = (await mem.access_log(todo.id))[0][1]
    assert newest.channel.value == "injected"
    assert newest.session_ref == recorded("session_start", project)["session_id"]


async def test_other_events_and_empty_prompts_get_an_empty_200(
    tmp_path: Path, project: Path
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "claude-code", "The invoice export runs nightly", todo="Fix the export")
    async with hook_app(store) as app, client(app) as c:
        for payload in (
            {**recorded("user_prompt", project), "hook_event_name": "PreToolUse"},
            {**recorded("user_prompt", project), "hook_event_name": "Stop"},
            recorded("user_prompt", project, prompt="   "),
            {"cwd": str(project)},
        ):
            response = await post(c, payload)
            assert (response.status_code, response.content) == (200, b""), payload


async def test_bad_bodies_and_web_pages_are_refused_and_nothing_is_logged(
    tmp_path: Path, project: Path
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "claude-code", todo="Renew the TLS certificate")
    async with hook_app(store) as app, client(app) as c:
        assert (await post(c, b"not json")).status_code == 400
        assert (await post(c, b"[1, 2]")).status_code == 400
        typed = await post(c, b'{"hook_event_name": "UserPromptSubmit", "prompt": 5}')
        assert typed.status_code == 400
        assert typed.json() == {"error": "the hook input's 'prompt' is int, not text"}
        page = await post(c, recorded("session_start", project), Origin="http://evil.example")
        assert page.status_code == 403
        assert page.json() == {"error": "hooks are not answered to web pages"}
        over = await post(c, b" " * (1024 * 1024 + 1))
        assert over.status_code == 413
        assert over.json() == {"error": "the hook input is over 1 MB; send the hook JSON only"}
        plain = await c.post(
            "/hooks",
            content=json.dumps(recorded("session_start", project)),
            headers={"Content-Type": "text/plain"},
        )
        assert plain.status_code == 415
    async with open_memory(store, "claude-code") as mem:
        todo = (await mem.todo("list")).todos[0]
        assert [r.channel.value for _, r in await mem.access_log(todo.id)] == ["created"]


async def test_an_answer_not_ready_by_the_hooks_deadline_is_an_empty_200(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "claude-code", WIFI)
    async with hook_app(store) as app, client(app) as c:
        prompt = recorded("user_prompt", project, prompt="where is the office wi-fi password")
        assert "whiteboard" in context(await post(c, prompt))
        monkeypatch.setattr("nooa_mcp.hooks.http.HOOK_SECONDS", 0)
        late = await post(c, prompt)
    assert (late.status_code, late.content) == (200, b"")


async def test_a_foreign_host_gets_421_as_on_mcp(tmp_path: Path, project: Path) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "claude-code", todo="Renew the TLS certificate")
    loopback = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    async with Engine.open(Settings(store=store), HashEmbedder()) as engine:
        app = Starlette(routes=[hook_route(lambda: engine, allowed_hosts=loopback)])
        async with client(app) as c:
            payload = recorded("session_start", project)
            assert (await post(c, payload, Host="evil.example:8765")).status_code == 421
            assert (await post(c, payload, Host="127.0.0.2:8765")).status_code == 421
            assert "Renew the TLS" in context(await post(c, payload, Host="localhost:8765"))


async def test_the_route_answers_503_until_the_engine_runs() -> None:
    app = Starlette(routes=[hook_route(lambda: None)])
    async with client(app) as c:
        assert (await post(c, {"hook_event_name": "SessionStart"})).status_code == 503


# --------------------------------------------------------------------------- owners and tokens


async def test_with_tokens_the_route_needs_a_valid_one_and_its_owner_is_the_owner(
    tmp_path: Path, project: Path
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "alice@laptop", "Alice keeps the invoice export credentials in a vault")
    await remember(store, "bob", "Bob runs the invoice export by hand on Mondays")
    payload = recorded("user_prompt", project, owner="bob", reader_owner="bob")
    async with hook_app(store, tokens=TOKENS) as app, client(app) as c:
        missing = await post(c, payload)
        wrong = await post(c, payload, Authorization="Bearer not-a-token-at-all-000000")
        assert missing.status_code == wrong.status_code == 401
        assert "Bearer" in missing.headers["www-authenticate"]
        alice = context(await post(c, payload, Authorization=f"Bearer {ALICE}"))
    assert "Alice keeps" in alice and "Bob runs" not in alice


async def test_without_tokens_the_route_uses_the_servers_owner_else_claude_code(
    tmp_path: Path, project: Path
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "srv", "The server's owner notes the invoice export schedule")
    await remember(store, "claude-code", "Claude Code's owner notes the invoice export retries")
    payload = recorded("user_prompt", project, owner="srv")
    async with hook_app(store) as app, client(app) as c:
        default = context(await post(c, payload))
    async with hook_app(store, owner="srv") as app, client(app) as c:
        configured = context(await post(c, payload))
    assert "retries" in default and "schedule" not in default
    assert "schedule" in configured and "retries" not in configured


# --------------------------------------------------------------------------- the command asks


@asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[str]:
    """The app on a loopback socket bound before uvicorn starts (no waiting on a timer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    host, port = sock.getsockname()
    server = uvicorn.Server(server_config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield f"http://{host}:{port}"
        finally:
            server.should_exit = True


async def test_the_command_hook_with_url_is_answered_by_the_running_server(
    tmp_path: Path, project: Path
) -> None:
    store = tmp_path / "memory.sqlite"
    await remember(store, "alice@laptop", "Alice keeps the invoice export credentials in a vault")
    payload = recorded("user_prompt", project)
    # The command has no store of its own here: only the server can answer.
    env = hook_env(tmp_path, NOOA_TOKEN=ALICE)
    elsewhere = str(tmp_path / "empty.sqlite")
    async with hook_app(store, tokens=TOKENS) as app, serving(app) as url:
        answer = await anyio.to_thread.run_sync(
            lambda: run_hook(
                "user-prompt", payload, env, "--store", elsewhere, after=("--url", url + "/mcp")
            )
        )
    assert answer.code == 0
    assert answer.event == "UserPromptSubmit"
    assert "Alice keeps the invoice export credentials" in answer.context
    assert log_lines(tmp_path) == []


def test_hook_urls_and_chunked_answers_are_read_as_a_server_sends_them() -> None:
    assert hook_url("http://127.0.0.1:8765") == "http://127.0.0.1:8765/hooks"
    assert hook_url("http://127.0.0.1:8765/mcp/") == "http://127.0.0.1:8765/hooks"
    assert hook_url("http://[::1]:8765/hooks") == "http://[::1]:8765/hooks"
    assert _unchunk(b'4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n') == b'{"a":1}'


# --------------------------------------------------------------------------- a huge body


def _post_huge(host: str, port: int, total: int, chunked: bool) -> tuple[int, bytes]:
    """POST `total` bytes of JSON-ish filler to /hooks in 1 MiB writes; (bytes the server took
    before it stopped reading, the start of its answer)."""
    head = f"POST /hooks HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {total}\r\n\r\n"
    piece = b" " * (1 << 20)
    sent = 0
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(head.encode())
        try:
            while sent < total:
                conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
            if chunked:
                conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed: what it should do
        try:
            answer = conn.recv(200)
        except OSError:
            answer = b""  # reset before the answer could be read: the RSS says the rest
    return sent, answer


@pytest.mark.processes
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_400_mb_post_to_hooks_is_refused_while_reading(
    tmp_path: Path, chunked: bool
) -> None:
    from shared_support import http_server, proc_status, serve_args

    total = 400 << 20
    async with http_server(serve_args(tmp_path / "s.sqlite")) as server:
        pid = server.process.pid
        before = proc_status(pid, "VmHWM")  # peak RSS, kB
        sent, answer = await anyio.to_thread.run_sync(
            _post_huge, server.host, server.port, total, chunked
        )
        peak = proc_status(pid, "VmHWM")
    print(
        f"{'chunked' if chunked else 'content-length'}: peak RSS {before // 1024} -> "
        f"{peak // 1024} MiB, {sent >> 20} MiB sent of 400, answer {answer[:12]!r}"
    )
    # The body alone is 400 MiB: a server that held it fails this bound whatever else it
    # holds (the model loading in the background adds up to ~170 MiB; main peaked at 1,009).
    assert peak < 400 * 1024, (before, peak)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 413"), answer


# --------------------------------------------------------------------------- a client's paths


async def _high(store: Path, owner: str) -> None:
    async with open_memory(store, owner) as mem:
        await mem.author("Deploys of billing need a second reviewer", importance="HIGH")


def _label(text: str) -> str:
    (line,) = [x for x in text.splitlines() if x.startswith("Most important memories")]
    return line


async def test_the_route_names_a_clients_folder_without_looking_at_the_servers_disk(
    tmp_path: Path, project: Path
) -> None:
    """A token holder posted cwds and read the label back: "/root/.ssh" answered "memories for
    .ssh", a folder that does not exist no label, and a path inside a checkout the checkout's
    name. The label now comes from the cwd's own last folder, on whichever machine it is."""
    store = tmp_path / "memory.sqlite"
    await _high(store, "claude-code")
    (project / "src").mkdir()
    (tmp_path / "real" / ".ssh").mkdir(parents=True)
    answers = {}
    async with hook_app(store) as app, client(app) as c:
        for cwd in (
            project / "src",
            tmp_path / "nowhere" / "src",
            tmp_path / "real" / ".ssh",
            tmp_path / "gone" / ".ssh",
        ):
            answers[cwd] = _label(context(await post(c, recorded("session_start", cwd))))
    labels = list(answers.values())
    assert labels[0] == labels[1] == "Most important memories (none labelled src):", answers
    assert labels[2] == labels[3] == "Most important memories (none labelled .ssh):", answers


async def test_the_command_hook_sends_the_project_it_found_on_its_own_disk(
    tmp_path: Path, project: Path
) -> None:
    store = tmp_path / "memory.sqlite"
    await _high(store, "alice@laptop")
    deep = project / "src" / "invoices"
    deep.mkdir(parents=True)
    env = hook_env(tmp_path, NOOA_TOKEN=ALICE)
    elsewhere = str(tmp_path / "empty.sqlite")
    async with hook_app(store, tokens=TOKENS) as app, serving(app) as url:
        answer = await anyio.to_thread.run_sync(
            lambda: run_hook(
                "session-start",
                recorded("session_start", deep),
                env,
                "--store",
                elsewhere,
                after=("--url", url),
            )
        )
    assert answer.code == 0 and log_lines(tmp_path) == []
    assert _label(answer.context) == "Most important memories (none labelled billing):"


async def test_escaped_lone_surrogates_in_the_input_are_answered_not_a_500(
    tmp_path: Path, project: Path
) -> None:
    """JSON may escape a lone surrogate ("\\ud800"), which no UTF-8 answer can hold: the
    route answered 500 to one in a prompt, a cwd, a session id or the project's name."""
    store = tmp_path / "memory.sqlite"
    await _high(store, "claude-code")
    start = {"hook_event_name": "SessionStart", "session_id": "s1"}
    bodies = [
        {**start, "cwd": "/srv/bill\\udfffing"},
        {**start, "cwd": str(project), "nooa_project": "bill\\ud800ing"},
        {**start, "cwd": str(project), "session_id": "s\\ud800"},
        {**start, "hook_event_name": "UserPromptSubmit", "cwd": str(project),
         "prompt": "who reviews billing \\ud800 deploys?"},
    ]  # fmt: skip
    async with hook_app(store) as app, client(app) as c:
        for body in bodies:
            raw = json.dumps(body).replace("\\\\u", "\\u").encode()
            assert b"\\ud" in raw.lower()
            response = await post(c, raw)
            assert response.status_code == 200, (body, response.text)
            if body["hook_event_name"] == "SessionStart":
                label = _label(context(response))
                assert "\ufffd" in label or "billing" in label, label


def test_a_label_is_a_folders_name_and_a_home_folder_has_none() -> None:
    from nooa_mcp.hooks.paths import label_of
    from nooa_mcp.hooks.run import _payload

    assert [label_of(c) for c in ("/srv/billing/", "/home/alice", "/Users/bob", "/root")] == [
        "billing",
        "",
        "",
        "",
    ]
    assert label_of("/home/alice/billing") == "billing"
    assert label_of("//home/alice") == label_of("/var/home/alice") == ""
    assert label_of("relative/billing") == label_of("") == label_of("/") == ""
    assert _payload(r'{"prompt": "a\ud800b", "cwd": "/x\u0000y"}') == {
        "prompt": "a\ufffdb",
        "cwd": "/x\ufffdy",
    }
