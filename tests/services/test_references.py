"""References: parsing, root confinement, preview capture and live resolution (DESIGN.md §11)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from nooa_mcp.domain.references import (
    memory_targets,
    parse_reference,
    parse_references,
)
from nooa_mcp.domain.schema import Reference
from nooa_mcp.errors import InvalidInput, NotFound, ReferenceOutsideRoot
from nooa_mcp.services.references import capture, confine, resolve

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def root(tmp_path):
    base = tmp_path / "root"
    (base / "docs").mkdir(parents=True)
    (base / "docs" / "notes.md").write_text("deploy with make release\n" + "x" * 500)
    (tmp_path / "secret.txt").write_text("the password is hunter2")
    return base


def test_parse_the_three_kinds():
    assert parse_reference("file:docs/notes.md").uri == "file:docs/notes.md"
    assert parse_reference("memory:3F9A2C1D").target == "3f9a2c1d"
    assert parse_reference("url:https://example.org/a?b=1").kind == "url"


def test_a_bare_web_address_is_a_url_reference():
    assert parse_reference("https://example.org").uri == "url:https://example.org"


def test_a_file_path_is_normalised_without_dot_segments():
    assert parse_reference("file:./docs//notes.md").target == "docs/notes.md"


@pytest.mark.parametrize(
    "bad",
    ["notes.md", "ftp:x", "memory:xyz", "memory:abc", "url:not an address", "file:", 42, None],
)
def test_malformed_references_raise_invalid_input_naming_the_field(bad):
    with pytest.raises(InvalidInput) as exc:
        parse_reference(bad, field="references[0]")
    assert exc.value.field == "references[0]"


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../secret.txt", "docs/../../secret.txt", "~/x", "C:/x"]
)
def test_absolute_and_climbing_paths_are_outside_the_root(path):
    with pytest.raises(ReferenceOutsideRoot):
        parse_reference("file:" + path)


@pytest.mark.parametrize(
    "path",
    [
        "\uff0e\uff0e/secret.txt",  # full-width dots
        "docs\uff0fnotes.md",  # full-width slash
        "docs\u2215notes.md",  # division slash
        "docs\\..\\secret.txt",  # backslashes
        "docs/notes.md\x00.png",  # NUL byte
        "docs/\u202enotes.md",  # right-to-left override
    ],
)
def test_unicode_tricks_and_nul_bytes_are_refused(path):
    with pytest.raises(InvalidInput):
        parse_reference("file:" + path)


def test_parse_references_drops_repeats_and_caps_the_count():
    refs = parse_references(["file:a.md", "file:./a.md", "memory:abcdef12"])
    assert [r.uri for r in refs] == ["file:a.md", "memory:abcdef12"]
    with pytest.raises(InvalidInput):
        parse_references([f"file:f{i}.md" for i in range(21)])


def test_a_symlink_escaping_the_root_is_refused(root, tmp_path):
    """DESIGN.md §11: no symlink escape; the real path is checked, not the text."""
    os.symlink(tmp_path / "secret.txt", root / "docs" / "innocent.md")
    os.symlink(tmp_path, root / "up")
    with pytest.raises(ReferenceOutsideRoot):
        confine(root, "docs/innocent.md")
    with pytest.raises(ReferenceOutsideRoot):
        capture(parse_reference("file:up/secret.txt"), root=root)


def test_a_symlink_inside_the_root_is_followed(root):
    os.symlink(root / "docs" / "notes.md", root / "alias.md")
    assert confine(root, "alias.md") == (root / "docs" / "notes.md").resolve()


def test_capture_takes_a_bounded_preview_of_a_file(root):
    ref = capture(parse_reference("file:docs/notes.md"), root=root, at=T0)
    # The documented 200 characters (DESIGN §17.1 PREVIEW_CHARS) of a 525-character file:
    # its first 199 and a mark that the rest was cut.
    text = "deploy with make release\n" + "x" * 500
    assert ref.preview == text[:199] + "…"
    assert ref.captured_at == T0


def test_capture_refuses_a_missing_file_and_a_missing_root(root):
    with pytest.raises(InvalidInput):
        capture(parse_reference("file:docs/missing.md"), root=root)
    with pytest.raises(InvalidInput) as exc:
        capture(parse_reference("file:docs/notes.md"), root=None)
    assert "reference root" in exc.value.problem


def test_capture_of_a_memory_reference_goes_through_the_lookup():
    contents = {"abcdef12" * 4: "the release train leaves on Fridays"}
    ref = capture(parse_reference("memory:" + "abcdef12" * 4), root=None, lookup=contents.get)
    assert ref.preview == "the release train leaves on Fridays"
    with pytest.raises(InvalidInput):
        capture(parse_reference("memory:" + "0" * 32), root=None, lookup=contents.get)


def test_resolve_is_live_with_the_current_value_then_dangling_with_the_snapshot(root):
    ref = capture(parse_reference("file:docs/notes.md"), root=root, at=T0)
    (root / "docs" / "notes.md").write_text("deploy with the new pipeline")
    live = resolve(ref, root=root)
    assert (live.state, live.value) == ("LIVE", "deploy with the new pipeline")
    (root / "docs" / "notes.md").unlink()
    gone = resolve(ref, root=root)
    assert gone.state == "DANGLING"
    assert gone.value.startswith("deploy with make release")
    assert gone.snapshot_at == T0


def test_resolve_turns_a_symlink_swapped_out_of_the_root_into_dangling(root, tmp_path):
    target = root / "docs" / "notes.md"
    ref = capture(parse_reference("file:docs/notes.md"), root=root, at=T0)
    target.unlink()
    os.symlink(tmp_path / "secret.txt", target)
    resolved = resolve(ref, root=root)
    assert resolved.state == "DANGLING"
    assert "hunter2" not in resolved.value


def test_resolve_memory_references_through_the_lookup():
    ident = "12345678" * 4
    ref = Reference(kind="memory", target=ident, preview="old text", captured_at=T0)
    assert resolve(ref, root=None, lookup={ident: "new text"}.get).value == "new text"
    dangling = resolve(ref, root=None, lookup={}.get)
    assert (dangling.state, dangling.value, dangling.snapshot_at) == ("DANGLING", "old text", T0)


def test_urls_are_opaque_and_never_fetched():
    ref = capture(parse_reference("url:https://example.org"), root=None, at=T0)
    assert resolve(ref, root=None).state == "OPAQUE"


def test_binary_files_and_directories_get_descriptive_previews(root):
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert capture(parse_reference("file:blob.bin"), root=root).preview.startswith("binary")
    assert "notes.md" in capture(parse_reference("file:docs"), root=root).preview


def test_memory_targets_lists_ids_in_order_without_repeats():
    refs = parse_references(["memory:abcdef12", "file:a.md", "memory:abcdef12", "memory:123456"])
    assert memory_targets(refs) == ["abcdef12", "123456"]


# --------------------------------------------------------------------------- through the facade

from nooa_mcp import Memory, Settings  # noqa: E402
from nooa_mcp.embeddings import HashEmbedder  # noqa: E402


@pytest.mark.anyio
async def test_author_captures_previews_and_recall_resolves_them_live(rooted, root):
    target = await rooted.author("the release checklist has nine steps")
    note = await rooted.author(
        "how we ship releases",
        references=["file:docs/notes.md", f"memory:{target.id[:8]}", "https://example.org/ship"],
    )
    stored = (await rooted.get(note.id)).references
    assert [r.uri for r in stored] == [
        "file:docs/notes.md",
        f"memory:{target.id}",
        "url:https://example.org/ship",
    ]
    (root / "docs" / "notes.md").write_text("ship with the new pipeline")
    await rooted.update(target.id, content="the release checklist has ten steps")
    (hit,) = [h for h in (await rooted.recall("how we ship releases", k=3)).hits if h.id == note.id]
    states = {r.uri: (r.state, r.value) for r in hit.references}
    assert states["file:docs/notes.md"] == ("LIVE", "ship with the new pipeline")
    assert states[f"memory:{target.id}"] == ("LIVE", "the release checklist has ten steps")
    assert states["url:https://example.org/ship"][0] == "OPAQUE"


@pytest.mark.anyio
async def test_resolving_a_memory_reference_at_recall_logs_deref(rooted):
    target = await rooted.author("the on-call phone is in the drawer")
    note = await rooted.author("pager duty notes", references=[f"memory:{target.id}"])
    await rooted.recall("pager duty notes", k=1)
    log = await rooted.access_log(target.id)
    assert log[0][1].channel.value == "deref"
    assert note.id[:8] in (log[0][1].query or "")
    assert (await rooted.get(target.id)).channels.get("deref") == 1


@pytest.mark.anyio
async def test_a_forgotten_target_resolves_dangling_with_its_snapshot(rooted):
    target = await rooted.author("the coffee machine code is 1234")
    note = await rooted.author("kitchen notes", references=[f"memory:{target.id}"])
    await rooted.forget(target.id)
    (ref,) = (await rooted.get(note.id)).references
    assert ref.state == "DANGLING"
    assert ref.value == "the coffee machine code is 1234"
    assert ref.snapshot_at is not None


@pytest.mark.anyio
async def test_author_refuses_escaping_and_missing_references(rooted, root, tmp_path):
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    with pytest.raises(ReferenceOutsideRoot):
        await rooted.author("x", references=["file:link.txt"])
    with pytest.raises(ReferenceOutsideRoot):
        await rooted.author("x", references=["file:../secret.txt"])
    with pytest.raises(InvalidInput):
        await rooted.author("x", references=["file:nope.md"])
    with pytest.raises(NotFound) as missing:
        await rooted.author("x", references=["memory:abcdef12"])
    assert missing.value.ident == "abcdef12"
    assert (await rooted.stats()).total == 0


@pytest.mark.anyio
async def test_memory_references_obey_owner_scope(tmp_path, root):
    path = tmp_path / "shared.sqlite"
    async with Memory.open(path, owner="alice@a", embedder=HashEmbedder()) as alice:
        secret = await alice.author("alice's private deployment token location")
    settings = Settings(store=path, owner="bob@b", reference_root=root)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as bob:
        with pytest.raises(NotFound) as hidden:
            await bob.author("pointer", references=[f"memory:{secret.id}"])
    # Another role's memory is "no such memory" to bob, not "forbidden": nothing confirms it.
    assert hidden.value.ident == secret.id
    assert "alice" not in str(hidden.value) and "deployment" not in str(hidden.value)


def test_an_exported_reference_dict_keeps_its_snapshot():
    ref = parse_reference(
        {"kind": "file", "target": "docs/a.md", "preview": "old", "captured_at": T0.isoformat()}
    )
    assert (ref.uri, ref.preview, ref.captured_at) == ("file:docs/a.md", "old", T0)
    with pytest.raises(ReferenceOutsideRoot):
        parse_reference({"kind": "file", "target": "../a.md", "preview": "x"})


@pytest.mark.anyio
async def test_an_imported_reference_with_a_snapshot_is_not_recaptured(rooted):
    note = await rooted.author(
        "imported note",
        references=[{"kind": "file", "target": "gone/away.md", "preview": "as it was"}],
    )
    (ref,) = (await rooted.get(note.id)).references
    assert (ref.state, ref.value) == ("DANGLING", "as it was")
