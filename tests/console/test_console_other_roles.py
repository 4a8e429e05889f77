"""`nooa-mcp ui` without --owner on a store whose memories all belong to a role: the console
says so and how to see them, instead of showing an empty store; a console behind tokens never
tells a token's owner that other roles exist."""

from __future__ import annotations

import pytest
from browsing import console_at, shot

from nooa_mcp import Memory, Settings
from nooa_mcp.console import LoopbackOnly, TokenLogin

pytestmark = pytest.mark.anyio

SECRET = "The production SSH keys are in the team vault"


@pytest.fixture
async def store(tmp_path, embedder):
    path = tmp_path / "roles.sqlite"
    async with Memory.open(path, owner="me@code", embedder=embedder) as mem:
        await mem.author(SECRET)
        await mem.author("Deploys go out on Tuesdays")
    async with Memory.open(path, owner="ops", embedder=embedder) as mem:
        await mem.author("The pager rota is in the wiki")
    return path


async def test_the_loopback_console_names_the_roles_and_the_flag(store, embedder, chromium):
    async with console_at(Settings(store=store), embedder, LoopbackOnly("")) as url:
        page = await chromium.new_page()
        for path in ("/stats", "/memories", "/?q=SSH+keys"):
            await page.goto(url + path)
            note = page.locator("[data-other-roles]")
            assert await note.count() == 1, path
            text = await note.inner_text()
            assert "this store holds 3 live memories of other roles (me: 2, ops: 1)" in text
            assert "nooa-mcp --owner me ui" in text
            assert "vault" not in await page.content()
        await shot(page, "other-roles")
        # A filter that finds nothing is not an empty scope: no note then.
        await page.goto(url + "/memories?type=todo")
        assert await page.locator("[data-other-roles]").count() == 0


async def test_a_token_owner_is_never_told_about_other_roles(store, embedder, chromium):
    token = "s" * 32
    async with console_at(Settings(store=store), embedder, TokenLogin({token: "stranger"})) as url:
        context = await chromium.new_context()
        page = await context.new_page()
        await page.goto(url + "/stats")
        await page.fill("#token", token)
        await page.click("button[type=submit]")
        await page.wait_for_selector(".cards")
        for path in ("/stats", "/memories", "/?q=SSH+keys"):
            await page.goto(url + path)
            body = await page.content()
            assert "other roles" not in body and "me: 2" not in body, path
        await context.close()
