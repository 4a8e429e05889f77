"""Two owners, one store, the console mounted at /ui behind tokens as beside /mcp.

A token sees exactly what its owner may see: the other owner's memories appear in no page,
are not found by id, and cannot be changed by a forged form.
"""

from __future__ import annotations

import pytest
from browsing import console_at, shot

from nooa_mcp import Memory, Settings
from nooa_mcp.console import TokenLogin

pytestmark = pytest.mark.anyio

ALICE, BOB = "alice@laptop", "bob@desk"
TOKENS = {"a" * 32: ALICE, "b" * 32: BOB}
LINES = {
    ALICE: ["Alice keeps the SSH keys in the team vault", "The deploy checklist lives in Notion"],
    BOB: ["Bob waters the office plants on Mondays"],
}


@pytest.fixture
async def two_owners(tmp_path, embedder):
    store = tmp_path / "shared.sqlite"
    ids: dict[str, list[str]] = {ALICE: [], BOB: []}
    for owner, lines in LINES.items():
        async with Memory.open(store, owner=owner, embedder=embedder) as mem:
            for line in lines:
                ids[owner].append((await mem.author(line, tags=["notes"])).id)
    return Settings(store=store), ids


async def sign_in(chromium, url: str, token: str):
    context = await chromium.new_context()
    page = await context.new_page()
    await page.goto(url + "/memories")
    assert "/login" in page.url
    await page.fill("#token", token)
    await page.click("button[type=submit]")
    await page.wait_for_selector("table.list, [data-empty]")
    return context, page


async def test_a_second_owner_sees_none_of_the_first_owners_memories(
    two_owners, embedder, chromium
):
    settings, ids = two_owners
    async with console_at(settings, embedder, TokenLogin(TOKENS), mount="/ui") as url:
        _, alice = await sign_in(chromium, url, "a" * 32)
        shown = await alice.locator("table.list tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.id)"
        )
        assert sorted(shown) == sorted(ids[ALICE])
        assert await alice.inner_text("[data-owner]") == ALICE

        _, bob = await sign_in(chromium, url, "b" * 32)
        assert await bob.inner_text("[data-owner]") == BOB
        pages = [
            "/memories?archived=all",
            "/memories?tag=notes",
            "/?q=SSH+keys+deploy+checklist",
            "/todos",
            "/intents",
            "/stats",
        ]
        for path in pages:
            await bob.goto(url + path)
            html = await bob.content()
            for hidden in ids[ALICE]:
                assert hidden not in html and hidden[:8] not in html, path
            for line in LINES[ALICE]:
                assert line not in html, path
        await shot(bob, "second-owner-search")
        response = await bob.goto(f"{url}/memory/{ids[ALICE][0]}")
        assert response.status == 404
        assert LINES[ALICE][0] not in await bob.content()


async def test_a_forged_forget_across_owners_is_refused_and_changes_nothing(
    two_owners, embedder, chromium
):
    settings, ids = two_owners
    async with console_at(settings, embedder, TokenLogin(TOKENS), mount="/ui") as url:
        _, bob = await sign_in(chromium, url, "b" * 32)
        await bob.goto(f"{url}/memory/{ids[BOB][0]}")
        # Bob's own valid form, pointed at Alice's memory.
        await bob.evaluate(
            "target => { const f = document.querySelector('form[action$=\"/forget\"]');"
            " f.action = f.action.replace(/memory\\/[0-9a-f]+/, 'memory/' + target); f.submit(); }",
            ids[ALICE][0],
        )
        await bob.wait_for_selector("[data-error]")
        assert "no memory" in await bob.inner_text("[data-error]")
    async with Memory.open(settings.store, owner=ALICE, embedder=embedder) as mem:
        assert not (await mem.get(ids[ALICE][0])).archived


async def test_without_a_token_every_page_asks_to_sign_in(two_owners, embedder, chromium):
    settings, _ = two_owners
    async with console_at(settings, embedder, TokenLogin(TOKENS), mount="/ui") as url:
        page = await chromium.new_page()
        await page.goto(url + "/stats")
        assert page.url.endswith("/ui/login?next=%2Fstats")
        await page.fill("#token", "c" * 32)
        await page.click("button[type=submit]")
        assert "not in the tokens file" in await page.inner_text("[role=alert]")
        await page.fill("#token", "a" * 32)
        await page.click("button[type=submit]")
        await page.wait_for_selector(".cards")
        assert page.url.endswith("/ui/stats")
        cookies = {c["name"]: c for c in await page.context.cookies()}
        assert (
            cookies["nooa_console"]["httpOnly"] and cookies["nooa_console"]["sameSite"] == "Strict"
        )
