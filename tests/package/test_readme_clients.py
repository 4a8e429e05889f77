"""The README's client set-ups do what its text says: Claude Desktop, Claude Code and Codex
configured as written share one role, so each recalls what the others wrote; and none needs
an environment variable to run offline (the model comes with the package)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nooa_mcp.domain.scope import owner_role

REPOSITORY = Path(__file__).resolve().parents[2]
README = (REPOSITORY / "README.md").read_text(encoding="utf-8")


def configured_owners() -> dict[str, str]:
    """The owner each client's snippet passes, by client."""
    example = json.loads((REPOSITORY / "claude_desktop_config.example.json").read_text())
    desktop_args = example["mcpServers"]["nooa"]["args"]
    found = {
        "desktop (README)": re.search(r'"args": \["--owner", "([^"]+)"\]', README),
        "claude code": re.search(r"claude mcp add nooa .*--owner (\S+)", README),
        "codex": re.search(r'args = \["--owner", "([^"]+)"\]', README),
    }
    owners = {client: match.group(1) for client, match in found.items() if match}
    assert len(owners) == len(found), f"a client snippet names no owner: {owners}"
    owners["desktop (example file)"] = desktop_args[desktop_args.index("--owner") + 1]
    return owners


def test_the_client_snippets_share_the_role_the_text_promises() -> None:
    owners = configured_owners()
    promised = re.search(r"the same role \(`--owner ([^`@]+)@", README)
    assert promised is not None
    assert {client: owner_role(o) for client, o in owners.items()} == {
        client: promised.group(1) for client in owners
    }


def test_no_snippet_sets_an_offline_variable_the_product_does_not_need() -> None:
    example = (REPOSITORY / "claude_desktop_config.example.json").read_text()
    assert "HF_HUB_OFFLINE" not in example
    blocks = re.findall(r"```(?:json|toml|bash)\n(.*?)```", README, re.S)
    assert blocks and not [b for b in blocks if "HF_HUB_OFFLINE" in b]
