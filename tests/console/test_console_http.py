"""The console over HTTP without a browser: CSRF, host and origin checks, headers, SSE."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import time_machine
from conftest import OWNER

from nooa_mcp import Memory, Settings
from nooa_mcp.console import Console, LoopbackOnly, TokenLogin, standalone_app
from nooa_mcp.engine import Engine

pytestmark = pytest.mark.anyio

ORIGIN = "http://127.0.0.1:8766"
YEAR_AGO = datetime.now(UTC) - timedelta(days=365)


@pytest.fixture
async def forgettable(owner_settings, embedder) -> list[str]:
    """Four trivial notes nobody has read for a year: the next prune archives them."""
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        with time_machine.travel(YEAR_AGO):  # learned a year ago
            return [
                (await mem.author(f"Old note {i} about parking", importance="TRIVIAL")).id
                for i in range(4)
            ]


@pytest.fixture
async def console(owner_settings, embedder, seeded):
    async with Engine.open(owner_settings, embedder) as engine:
        c = Console.for_engine(engine, LoopbackOnly(OWNER))
        async with c.running():
            yield c


def client(app, host: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 50000))
    return httpx.AsyncClient(transport=transport, base_url=ORIGIN)


async def form_token(http: httpx.AsyncClient, path: str) -> str:
    page = await http.get(path)
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


async def test_a_write_without_the_forms_token_is_refused_and_changes_nothing(
    console, owner_settings, embedder, seeded
):
    async with client(console.app()) as http:
        await http.get("/")  # the browser's nonce cookie
        response = await http.post(f"/memory/{seeded['lunch']}/forget", data={"csrf": "forged"})
    assert response.status_code == 403
    assert "reload the page" in response.text
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        assert not (await mem.get(seeded["lunch"])).archived


async def test_a_write_with_a_valid_token_from_another_origin_is_refused(console, seeded):
    async with client(console.app()) as http:
        token = await form_token(http, f"/memory/{seeded['lunch']}")
        refused = await http.post(
            f"/memory/{seeded['lunch']}/forget",
            data={"csrf": token},
            headers={"origin": "http://evil.example"},
        )
        accepted = await http.post(
            f"/memory/{seeded['lunch']}/forget", data={"csrf": token}, headers={"origin": ORIGIN}
        )
    assert refused.status_code == 403
    assert accepted.status_code == 303 and accepted.headers["location"].endswith("note=forgotten")


async def test_a_foreign_host_header_is_refused_by_the_standalone_console(console):
    app = standalone_app(console, ["127.0.0.1", "localhost"])
    async with client(app) as http:
        assert (await http.get("/")).status_code == 200
        assert (await http.get("/", headers={"host": "rebind.example:8766"})).status_code == 400


async def test_without_tokens_a_request_from_another_machine_is_refused(console):
    async with client(console.app(), host="192.168.1.7") as http:
        response = await http.get("/memories")
    assert response.status_code == 403 and "loopback" in response.text


async def test_every_page_is_self_contained_under_a_strict_content_security_policy(console, seeded):
    paths = [
        "/",
        "/?q=ssh+keys",
        f"/why?q=ssh+keys&id={seeded['lunch']}",
        f"/memory/{seeded['keys']}",
        f"/memory/{seeded['keys']}/graph",
        "/memories",
        "/todos",
        "/intents",
        "/stats",
    ]
    async with client(console.app()) as http:
        for path in paths:
            response = await http.get(path)
            assert response.status_code == 200, path
            csp = response.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "script-src 'self'" in csp
            assert response.headers["x-content-type-options"] == "nosniff"
            assert not re.search(r'(src|href)="(https?:)?//', response.text), path
            assert "<script>" not in response.text and " style=" not in response.text, path


async def test_an_unknown_id_is_a_404_page_with_the_facades_sentence(console):
    async with client(console.app()) as http:
        response = await http.get("/memory/ffffffffffff")
    assert response.status_code == 404
    assert "no memory with id &#39;ffffffffffff&#39;" in response.text


async def test_a_reflection_streams_its_state_and_ends_completed(console, forgettable):
    async with client(console.app()) as http:
        token = await form_token(http, "/stats")
        started = await http.post("/reflect", data={"csrf": token, "step_prune": "1"})
        assert started.status_code == 303
        run_path = started.headers["location"]
        events = []
        async with http.stream("GET", run_path + "/events") as stream:
            kind = None
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    events.append((kind, json.loads(line.removeprefix("data: "))))
        page = await http.get(run_path)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "end" and set(kinds[:-1]) <= {"progress"}
    final = events[-1][1]
    assert final["status"] == "completed" and final["done"] == final["total"] == 4
    assert 'data-step="prune"' in page.text


async def test_a_reflection_run_reports_progress_between_its_items(
    owner_settings, embedder, forgettable
):
    async with Engine.open(owner_settings, embedder) as engine:
        console = Console.for_engine(engine, LoopbackOnly(OWNER))
        async with console.running():
            run = console.runs.start(Memory(engine, OWNER), ["prune"])
            states = [state async for state in console.runs.events(run)]
    assert states[0]["status"] == "running" and states[0]["done"] == 0
    assert states[-1]["status"] == "completed" and states[-1]["done"] == states[-1]["total"] == 4
    assert any(s["status"] == "running" and s["done"] > 0 for s in states[1:])
    # Another owner cannot see this run.
    assert console.runs.get(run.id, "bob") is None


async def test_signing_out_forgets_the_token_and_the_next_page_asks_for_it_again(
    owner_settings, embedder, seeded
):
    token = "k" * 32
    async with Engine.open(owner_settings, embedder) as engine:
        console = Console.for_engine(engine, TokenLogin({token: OWNER}))
        async with client(console.app(), host="10.1.2.3") as http:
            login_form = await http.get("/login")
            csrf_login = re.search(r'name="csrf" value="([^"]+)"', login_form.text).group(1)
            signed_in = await http.post("/login", data={"csrf": csrf_login, "token": token})
            assert signed_in.status_code == 303
            assert "httponly" in signed_in.headers["set-cookie"].lower()
            assert "samesite=strict" in signed_in.headers["set-cookie"].lower()
            assert (await http.get("/memories")).status_code == 200
            out_token = await form_token(http, "/memories")
            signed_out = await http.post("/logout", data={"csrf": out_token})
            assert signed_out.status_code == 303
            again = await http.get("/memories", headers={"accept": "text/html"})
    assert again.status_code == 303 and again.headers["location"] == "/login?next=%2Fmemories"


async def test_a_login_redirect_never_leaves_the_console(owner_settings, embedder, seeded):
    token = "k" * 32
    async with Engine.open(owner_settings, embedder) as engine:
        console = Console.for_engine(engine, TokenLogin({token: OWNER}))
        async with client(console.app()) as http:
            form = await http.get("/login")
            csrf_login = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
            for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
                response = await http.post(
                    "/login", params={"next": target}, data={"csrf": csrf_login, "token": token}
                )
                assert response.headers["location"] == "/", target


async def test_a_memory_page_shows_a_file_reference_live_and_then_dangling(tmp_path, embedder):
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.md").write_text("The release train leaves at noon")
    settings = Settings(store=tmp_path / "m.sqlite", owner=OWNER, reference_root=root)
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        note = await mem.author("Release timing lives in the notes", references=["file:notes.md"])
    async with Engine.open(settings, embedder) as engine:
        console = Console.for_engine(engine, LoopbackOnly(OWNER))
        async with client(console.app()) as http:
            live = await http.get(f"/memory/{note.id}")
            (root / "notes.md").unlink()
            dangling = await http.get(f"/memory/{note.id}")
    assert 'data-ref-state="LIVE"' in live.text and "leaves at noon" in live.text
    assert 'data-ref-state="DANGLING"' in dangling.text and "snapshot of" in dangling.text


async def test_a_shared_memory_is_readable_but_a_forged_forget_is_refused_as_the_tools_refuse(
    tmp_path, embedder
):
    store = tmp_path / "m.sqlite"
    async with Memory.open(store, owner="", embedder=embedder) as shared:
        note = await shared.author("The office closes at 6pm")
    settings = Settings(store=store, owner=OWNER)
    async with Engine.open(settings, embedder) as engine:
        console = Console.for_engine(engine, LoopbackOnly(OWNER))
        async with client(console.app()) as http:
            page = await http.get(f"/memory/{note.id}")
            token = await form_token(http, "/stats")
            refused = await http.post(f"/memory/{note.id}/forget", data={"csrf": token})
    assert "The office closes at 6pm" in page.text and "data-readonly" in page.text
    assert 'data-action="forget"' not in page.text
    assert refused.status_code == 403 and OWNER in refused.text
    async with Memory.open(store, owner="", embedder=embedder) as shared:
        assert not (await shared.get(note.id)).archived


async def test_a_fact_valid_only_from_a_later_date_is_flagged_with_its_date(tmp_path, embedder):
    """Search and the memory page flag it as recall does: it does not hold yet."""
    settings = Settings(store=tmp_path / "m.sqlite", owner=OWNER)
    ahead = datetime.now(UTC) + timedelta(days=40)
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        later = await mem.author("The office moves to the harbour building", valid_from=ahead)
        now = await mem.author("The office is in the old mill building")
    async with Engine.open(settings, embedder) as engine:
        console = Console.for_engine(engine, LoopbackOnly(OWNER))
        async with client(console.app()) as http:
            found = await http.get("/", params={"q": "where is the office building"})
            page = await http.get(f"/memory/{later.id}")
            other = await http.get(f"/memory/{now.id}")
    flag = (
        'data-flag="holds-from" title="valid_from is ahead: it does not hold yet">'
        f"holds from {ahead:%Y-%m-%d}"
    )
    assert found.text.count('data-flag="holds-from"') == 1 and flag in found.text
    assert flag in page.text and 'data-flag="holds-from"' not in other.text


async def test_the_memories_listing_pages_with_a_cursor_that_is_no_sequence_number(
    owner_settings, embedder
):
    """The More link's `after` was the store's sequence number, which counts every role's
    rows (DESIGN.md §10): it is an opaque cursor, and a number written by hand is refused."""
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        for i in range(52):
            await mem.author(f"Paged note number {i} about the parking rota")
    async with Engine.open(owner_settings, embedder) as engine:
        c = Console.for_engine(engine, LoopbackOnly(OWNER))
        async with c.running(), client(c.app()) as http:
            first = await http.get("/memories", headers={"accept": "text/html"})
            after = re.search(r'rel="next" href="[^"]*after=([^"&]+)', first.text).group(1)
            assert not after.isdigit()
            second = await http.get(f"/memories?after={after}", headers={"accept": "text/html"})
            assert second.status_code == 200
            assert "note number 51 about" in second.text
            assert "note number 0 about" not in second.text
            forged = await http.get("/memories?after=50", headers={"accept": "text/html"})
            assert forged.status_code == 400 and "after" in forged.text


async def test_a_console_behind_tokens_tells_a_client_not_asking_for_html_where_to_sign_in(
    owner_settings, embedder, seeded
):
    token = "k" * 32
    async with Engine.open(owner_settings, embedder) as engine:
        console = Console.for_engine(engine, TokenLogin({token: OWNER}))
        async with client(console.app(), host="10.1.2.3") as http:
            bare = await http.get("/", headers={"accept": "*/*"})
            posted = await http.post("/memory/x/forget", headers={"accept": "text/html"})
    # curl or a script: one sentence saying where to sign in, not a page linking to itself.
    assert bare.status_code == 401
    assert bare.headers["content-type"].startswith("text/plain")
    assert bare.text == "Sign in with a token first: open /login in a browser."
    # A browser's form sent without a session: the page's link is the sign-in, not "/".
    assert posted.status_code == 401
    links = re.findall(r'href="([^"]+)"', posted.text.split("<body", 1)[1])
    assert links == ["/login?next=%2Fmemory%2Fx%2Fforget"]


async def test_the_loopback_only_refusal_links_nowhere(console):
    async with client(console.app(), host="10.9.9.9") as http:
        refused = await http.get("/", headers={"accept": "text/html"})
    assert refused.status_code == 403
    assert "loopback" in refused.text
    assert "href=" not in refused.text.split("<body", 1)[1]
