"""References (DESIGN.md §11): their parsing, confinement, capture, previews and resolution.

Each test pins what a caller sees: the exact sentence of a refusal (field, problem and fix),
the kind of reference a text becomes, and the bytes of a preview; a test that accepted *some*
InvalidInput would pass a refusal with the wrong field, an empty problem or a lost fix.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from machine import machine_lacks

from nooa_mcp import Memory
from nooa_mcp.domain.references import (
    check_relative,
    clip,
    memory_targets,
    parse_reference,
    parse_references,
)
from nooa_mcp.domain.schema import Reference
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput, ReferenceOutsideRoot
from nooa_mcp.services import references as refs_service
from nooa_mcp.services.references import capture, confine, resolve

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FIX = "Use file:<relative path>, memory:<id> or url:<address>."
PATH_FIX = "Use a plain relative path inside the reference root, e.g. file:docs/notes.md."
OUTSIDE_FIX = "Use a relative path without '..' that stays inside the root."


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "docs").mkdir(parents=True)
    (base / "docs" / "notes.md").write_text("deploy with make release\n")
    return base


def refusal(fn, *args, **kwargs) -> InvalidInput:
    with pytest.raises(InvalidInput) as exc:
        fn(*args, **kwargs)
    return exc.value


# --------------------------------------------------------------------------- path text rules


@pytest.mark.parametrize("path", ["", "   "])
def test_an_empty_or_blank_path_is_refused_naming_the_field_and_the_fix(path):
    exc = refusal(check_relative, path, "refs[1]")
    assert str(exc) == f"refs[1]: file: needs a path. {PATH_FIX}"


@pytest.mark.parametrize(
    ("char", "code"),
    [("\x00", "0000"), ("\u202e", "202E"), ("\u2028", "2028"), ("\u2029", "2029")],
)
def test_control_format_and_separator_characters_are_refused_by_code_point(char, code):
    exc = refusal(check_relative, f"docs/a{char}b.md", "refs[0]")
    assert str(exc) == f"refs[0]: the path holds the control character U+{code}. {PATH_FIX}"


@pytest.mark.parametrize(
    ("char", "code"), [("\uff0e", "FF0E"), ("\uff0f", "FF0F"), ("\\", "005C"), ("\u2215", "2215")]
)
def test_characters_that_read_as_a_dot_or_slash_are_refused_by_code_point(char, code):
    exc = refusal(check_relative, f"docs{char}a.md", "refs")
    assert str(exc) == (
        f"refs: the path holds '{char}' (U+{code}), which reads as a dot or a slash. {PATH_FIX}"
    )


def test_a_compatibility_character_that_is_no_dot_or_slash_is_accepted():
    # NFKC turns these into other letters, but never into '.', '/' or '\\'.
    assert check_relative("docs/\ufb01le.md") == "docs/\ufb01le.md"  # the "fi" ligature
    assert check_relative("\uff21.md") == "\uff21.md"  # full-width A
    assert check_relative("\uff38.md") == "\uff38.md"  # full-width X


@pytest.mark.parametrize("path", ["/etc/passwd", "~/x", "C:/x", "c:/x", "z:x", "a/../../x"])
def test_absolute_drive_and_climbing_paths_are_outside_the_root(path):
    with pytest.raises(ReferenceOutsideRoot) as exc:
        check_relative(path, "refs[3]")
    assert exc.value.field == "refs[3]"
    assert str(exc.value) == (
        f"refs[3]: file:{path} is outside the reference root (relative paths only). " + OUTSIDE_FIX
    )


def test_a_path_of_only_dots_and_slashes_names_no_file():
    exc = refusal(check_relative, "././/", "refs")
    assert str(exc) == f"refs: file:./.// names no file. {PATH_FIX}"


def test_dot_segments_and_repeated_slashes_are_dropped():
    assert check_relative("./a//b/./c.md") == "a/b/c.md"
    assert check_relative("ab:c.md") == "ab:c.md"  # a colon after two letters is no drive


# --------------------------------------------------------------------------- parse_reference


def test_a_non_text_reference_is_refused_naming_the_field():
    assert str(refusal(parse_reference, 42, "refs[2]")) == f"refs[2]: 42 is not a reference. {FIX}"


def test_the_longest_reference_is_2000_characters():
    longest = "url:https://example.org/" + "a" * (2000 - len("url:https://example.org/"))
    assert parse_reference(longest).target == longest[4:]
    exc = refusal(parse_reference, longest + "a", "refs")
    assert str(exc) == f"refs: a reference of 2001 characters is too long. {FIX}"


def test_surrounding_space_is_not_counted_against_the_length():
    padded = "  file:" + "a" * 1995 + "  "
    assert parse_reference(padded).target == "a" * 1995


def test_a_bare_web_address_is_a_url_in_any_case():
    assert parse_reference("HTTPS://Example.org/x").uri == "url:HTTPS://Example.org/x"
    assert parse_reference("Http://example.org").uri == "url:Http://example.org"


def test_the_kind_is_read_without_case_or_space_around_it():
    assert parse_reference("FILE :docs/a.md").uri == "file:docs/a.md"
    assert parse_reference("Memory:ABCDEF").uri == "memory:abcdef"


def test_an_unknown_kind_is_refused_quoting_at_most_60_characters():
    exc = refusal(parse_reference, "ftp:" + "x" * 100, "refs[4]")
    quoted = "ftp:" + "x" * 55 + "…"
    assert str(exc) == f"refs[4]: '{quoted}' has no known kind. {FIX}"
    assert str(refusal(parse_reference, "notes.md")) == (
        f"references: 'notes.md' has no known kind. {FIX}"
    )


@pytest.mark.parametrize("ident", ["abcdef", "ABCDEF12", " abcdef12 ", "0123456789abcdef" * 2])
def test_a_memory_id_of_6_to_32_hex_characters_is_accepted_lowercased(ident):
    assert parse_reference("memory:" + ident).target == ident.strip().lower()


@pytest.mark.parametrize("ident", ["abcde", "abcdefg!", "0123456789abcdef" * 2 + "0", "xyzxyz"])
def test_a_memory_id_outside_the_rule_is_refused_with_the_rule(ident):
    exc = refusal(parse_reference, "memory:" + ident, "refs[0]")
    assert str(exc) == (
        f"refs[0]: 'memory:{clip(ident, 40)}' does not name a memory id. "
        "Use memory:<id> with at least 6 hex characters of the id."
    )


def test_a_long_bad_memory_id_is_quoted_clipped_to_40_characters():
    exc = refusal(parse_reference, "memory:" + "z" * 50)
    assert exc.problem == f"'memory:{'z' * 39}…' does not name a memory id."


@pytest.mark.parametrize(
    "address",
    [
        "not an address",
        "example.org",
        "https://exa mple.org",
        "https://x.org/\u200b",
        "ssh://a\x07b",
    ],
)
def test_a_url_without_scheme_or_with_spaces_or_controls_is_refused(address):
    exc = refusal(parse_reference, "url:" + address, "refs[5]")
    assert str(exc) == (
        f"refs[5]: 'url:{clip(address, 60)}' is not an address. "
        "Use url:<scheme>://<host>/..., e.g. url:https://example.org/page."
    )


def test_a_long_bad_url_is_quoted_clipped_to_60_characters():
    exc = refusal(parse_reference, "url:" + "y" * 80)
    assert exc.problem == f"'url:{'y' * 59}…' is not an address."


def test_a_url_target_is_stripped_and_kept_as_written():
    assert parse_reference("url:  ssh://Host.example/Repo  ").target == "ssh://Host.example/Repo"


def test_an_exported_reference_is_checked_and_normalised_like_a_written_one():
    ref = parse_reference({"kind": "file", "target": "./docs//a.md", "preview": "p"}, "refs")
    assert (ref.uri, ref.preview) == ("file:docs/a.md", "p")
    bad = {"kind": "file", "target": "a.md", "captured_at": "not a date"}
    assert str(refusal(parse_reference, bad, "refs[7]")) == (
        f"refs[7]: {bad!r} is not a reference. {FIX}"
    )
    with pytest.raises(ReferenceOutsideRoot) as exc:
        parse_reference({"kind": "file", "target": "../a.md"}, "refs[8]")
    assert exc.value.field == "refs[8]"


def test_a_reference_object_passes_through_unchanged():
    ref = Reference(kind="file", target="a.md", preview="kept", captured_at=T0)
    assert parse_reference(ref) is ref
    assert parse_references(ref) == [ref]


# --------------------------------------------------------------------------- parse_references


def test_no_references_is_an_empty_list_and_one_text_is_a_list_of_one():
    assert parse_references(None) == []
    assert [r.uri for r in parse_references("file:a.md")] == ["file:a.md"]


def test_twenty_distinct_references_are_accepted_and_repeats_do_not_count():
    many = [f"file:f{i}.md" for i in range(20)]  # the documented limit (DESIGN §17.1)
    assert len(parse_references(many + many)) == 20
    exc = refusal(parse_references, [*many, "file:one-more.md"], "refs")
    assert str(exc) == "refs: 21 references given. Pass at most 20."


def test_an_element_is_refused_with_the_field_given():
    assert refusal(parse_references, ["file:a.md", 3], "links").field == "links"


def test_memory_targets_skip_files_and_urls():
    parsed = parse_references(["url:https://x.org", "file:abcdef.md", "memory:abcdef"])
    assert memory_targets(parsed) == ["abcdef"]


def test_clip_keeps_text_that_fits_and_marks_what_it_cuts():
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdefg", 6) == "abcde…"


# --------------------------------------------------------------------------- confinement


def test_confine_names_the_field_and_the_real_root_when_a_symlink_leads_out(root, tmp_path):
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", root / "innocent.md")
    with pytest.raises(ReferenceOutsideRoot) as exc:
        confine(root, "./innocent.md", "refs[9]")
    assert str(exc.value) == (
        f"refs[9]: file:innocent.md is outside the reference root {os.path.realpath(root)}. "
        + OUTSIDE_FIX
    )


def test_confine_checks_the_path_text_with_the_field_given(root):
    assert refusal(confine, root, "a\\b", "refs[6]").field == "refs[6]"


def test_a_symlink_to_the_root_itself_stays_inside(root):
    os.symlink(root, root / "self")
    assert confine(root, "self") == Path(os.path.realpath(root))
    assert confine(root, "self/docs/notes.md") == Path(os.path.realpath(root / "docs/notes.md"))


# --------------------------------------------------------------------------- capture


def test_a_url_is_captured_without_a_preview_at_the_given_time():
    ref = capture(parse_reference("url:https://x.org"), root=None, at=T0)
    assert (ref.uri, ref.preview, ref.captured_at, ref.root) == ("url:https://x.org", "", T0, None)


def test_a_url_captured_again_drops_any_preview_it_carried():
    stale = Reference(kind="url", target="https://x.org", preview="old page text")
    assert capture(stale, root=None, at=T0).preview == ""


def test_a_capture_without_a_time_is_stamped_now():
    before = datetime.now(UTC)
    ref = capture(parse_reference("url:https://x.org"), root=None)
    assert before <= ref.captured_at <= datetime.now(UTC)


def test_a_memory_preview_is_clipped_to_200_characters():
    ident = "ab" * 16
    ref = capture(
        parse_reference("memory:" + ident), root=None, lookup={ident: "m" * 300}.get, at=T0
    )
    assert (ref.preview, ref.captured_at) == ("m" * 199 + "…", T0)


def test_a_missing_memory_is_refused_naming_its_short_id():
    ident = "cd" * 16
    for lookup in (None, {}.get):
        exc = refusal(capture, parse_reference("memory:" + ident), root=None, lookup=lookup)
        assert str(exc) == (
            "references: memory:cdcdcdcd does not exist or is not visible to you. "
            "Recall or list to find the id."
        )


def test_a_file_without_a_root_is_refused_naming_the_option_and_the_variable():
    exc = refusal(capture, parse_reference("file:a.md"), root=None, field="refs[0]")
    assert str(exc) == (
        "refs[0]: file:a.md needs a reference root, and none is configured. "
        "Start nooa-mcp with --reference-root DIR, or set NOOA_REFERENCE_ROOT."
    )


def test_a_missing_file_is_refused_naming_the_path_and_the_root(root):
    exc = refusal(capture, parse_reference("file:docs/gone.md"), root=root, field="refs[1]")
    assert (
        str(exc)
        == f"refs[1]: file:docs/gone.md does not exist under {root}. Check the relative path."
    )


def test_a_captured_file_records_the_real_root_and_the_time(root, tmp_path):
    os.symlink(root, tmp_path / "alias")
    ref = capture(parse_reference("file:docs/notes.md"), root=tmp_path / "alias", at=T0)
    assert (ref.preview, ref.captured_at) == ("deploy with make release\n", T0)
    assert ref.root == os.path.realpath(root)


def test_a_file_preview_is_200_characters_of_utf8_with_bad_bytes_replaced(root):
    (root / "accents.txt").write_text("é" * 300, encoding="utf-8")
    (root / "exact.txt").write_text("z" * 200)
    (root / "latin1.txt").write_bytes(b"caf\xe9 au lait")
    assert capture(parse_reference("file:accents.txt"), root=root).preview == "é" * 199 + "…"
    assert capture(parse_reference("file:exact.txt"), root=root).preview == "z" * 200
    assert capture(parse_reference("file:latin1.txt"), root=root).preview == "caf\ufffd au lait"


def test_a_binary_file_preview_gives_its_size_in_bytes(root):
    (root / "blob.bin").write_bytes(b"ab\x00" * 1000)
    assert capture(parse_reference("file:blob.bin"), root=root).preview == "binary file, 3000 bytes"


def test_a_named_pipe_and_a_socket_are_refused_by_kind(root):
    os.mkfifo(root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "sock"))
        for name, kind in (("pipe", "a named pipe"), ("sock", "a socket")):
            exc = refusal(capture, parse_reference(f"file:{name}"), root=root, field="refs")
            assert str(exc) == (
                f"refs: file:{name} is {kind}, not a file or folder. "
                "Reference a regular file or a folder."
            )
            assert resolve(Reference(kind="file", target=name), root=root).state == "DANGLING"
    finally:
        sock.close()


@pytest.mark.parametrize("kind", [stat.S_IFCHR, stat.S_IFBLK])
def test_a_character_or_block_device_is_refused_as_a_device(root, kind):
    try:
        os.mknod(root / "dev", kind | 0o600, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        machine_lacks(f"cannot make a device node here ({exc})")
    exc = refusal(capture, parse_reference("file:dev"), root=root)
    assert exc.problem == "file:dev is a device, not a file or folder."


# --------------------------------------------------------------------------- directory previews


def preview_of(root: Path, name: str) -> str:
    return capture(parse_reference(f"file:{name}"), root=root).preview


def test_a_directory_preview_lists_names_sorted_with_a_slash_on_folders(root):
    folder = root / "tree"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.md").write_text("b")
    (folder / "a.md").write_text("a")
    os.symlink(folder / "sub", folder / "link")  # a symlink is listed as itself, no slash
    assert preview_of(root, "tree") == "directory: a.md, b.md, link, sub/"
    (root / "empty").mkdir()
    assert preview_of(root, "empty") == "directory: "


def test_a_directory_preview_names_at_most_50_entries_and_counts_the_rest(root):
    folder = root / "many"
    folder.mkdir()
    names = [chr(c) for c in [*range(ord("a"), ord("z") + 1), *range(ord("A"), ord("Z") + 1)]]
    for name in names:  # 52 one-letter names: 50 of them fit in 200 characters
        (folder / name).write_text("")
    preview = preview_of(root, "many")
    listed = preview.removeprefix("directory: ").split(" … ")[0].split(", ")
    assert len(listed) == 50
    assert set(listed) <= set(names)
    assert listed == sorted(listed)
    assert preview.endswith(" … and 2 more")


def test_a_directory_preview_stops_at_the_first_name_that_would_pass_200_characters(root):
    folder = root / "long"
    folder.mkdir()
    exact = "n" * (200 - len("directory: "))
    (folder / exact).write_text("")
    assert preview_of(root, "long") == "directory: " + exact  # exactly 200 characters
    (folder / "z").write_text("")  # now the long name no longer fits with the count
    assert preview_of(root, "long") == "directory:  … and 2 more"


def test_a_directory_of_more_than_5000_entries_is_counted_as_more_than(root):
    folder = root / "huge"
    folder.mkdir()
    for i in range(5001):
        (folder / f"{i:05d}").touch()
    preview = preview_of(root, "huge")
    shown = preview.removeprefix("directory: ").split(" … ")[0].split(", ")
    assert preview.endswith(f" … and more than {5000 - len(shown)} more")
    assert len(preview) <= 200


# --------------------------------------------------------------------------- resolve


def test_a_url_resolves_opaque_with_its_snapshot():
    ref = Reference(kind="url", target="https://x.org", preview="p", captured_at=T0)
    out = resolve(ref, root=None)
    assert (out.uri, out.state, out.value, out.snapshot_at) == (
        "url:https://x.org",
        "OPAQUE",
        "p",
        T0,
    )


def test_a_live_memory_resolves_to_its_current_text_clipped():
    ident = "ef" * 16
    ref = Reference(kind="memory", target=ident, preview="old", captured_at=T0)
    out = resolve(ref, root=None, lookup={ident: "q" * 250}.get)
    assert (out.uri, out.state, out.value, out.snapshot_at) == (
        f"memory:{ident}",
        "LIVE",
        "q" * 199 + "…",
        None,
    )
    assert resolve(ref, root=None).state == "DANGLING"


def test_a_file_resolves_dangling_without_a_root_and_under_another_root(root, tmp_path):
    ref = capture(parse_reference("file:docs/notes.md"), root=root, at=T0)
    no_root = resolve(ref, root=None)
    assert (no_root.state, no_root.value, no_root.snapshot_at, no_root.note) == (
        "DANGLING",
        "deploy with make release\n",
        T0,
        "",
    )
    other = tmp_path / "other"
    (other / "docs").mkdir(parents=True)
    (other / "docs" / "notes.md").write_text("another project's notes")
    moved = resolve(ref, root=other)
    assert (moved.state, moved.value) == ("DANGLING", "deploy with make release\n")
    assert moved.note == "captured under another root than this server's reference root"
    legacy = ref.model_copy(update={"root": None})  # captured before roots were recorded
    assert resolve(legacy, root=other).value == "another project's notes"


def test_a_file_resolves_live_under_its_root_reached_through_a_symlink(root, tmp_path):
    ref = capture(parse_reference("file:docs/notes.md"), root=root, at=T0)
    os.symlink(root, tmp_path / "alias")
    live = resolve(ref, root=tmp_path / "alias")
    assert (live.uri, live.state, live.value, live.snapshot_at) == (
        "file:docs/notes.md",
        "LIVE",
        "deploy with make release\n",
        None,
    )


def test_a_stored_path_the_rules_now_refuse_resolves_dangling_instead_of_raising(root):
    ref = Reference(kind="file", target="docs\\notes.md", preview="snap", captured_at=T0)
    assert (resolve(ref, root=root).state, resolve(ref, root=root).value) == ("DANGLING", "snap")


def test_a_directory_resolves_live_with_its_listing(root):
    ref = Reference(kind="file", target="docs", preview="", captured_at=T0)
    assert resolve(ref, root=root).value == "directory: notes.md"


# --------------------------------------------------------------------------- slow file systems


@pytest.mark.anyio
async def test_file_work_that_outlasts_the_read_limit_is_abandoned(monkeypatch):
    """A hung read gives TimeoutError at once; its thread is left behind, not waited for."""
    monkeypatch.setattr(refs_service, "READ_SECONDS", 0.05)
    release = threading.Event()
    finished = threading.Event()

    def hung() -> str:
        release.wait(30)
        finished.set()
        return "late"

    try:
        with pytest.raises(TimeoutError):
            await refs_service._off_loop(hung)
        assert not finished.is_set()  # _off_loop returned while the read still hung
    finally:
        release.set()
    # The next read gets a thread as usual; with a limit a loaded machine can meet in the
    # scheduling alone (0.05 s), the quick call would time out on luck, so it gets a wide one.
    monkeypatch.setattr(refs_service, "READ_SECONDS", 30)
    assert await refs_service._off_loop(lambda: "quick") == "quick"
    await anyio.sleep(0)


def test_a_pipe_swapped_in_after_the_path_was_checked_is_never_read(root, monkeypatch):
    """The open descriptor is checked again: a file replaced by a pipe between the check and
    the open is refused, not read (a blocking read of a pipe would hang the server)."""
    os.mkfifo(root / "swapped")
    pipe = str(root / "swapped")
    regular = os.stat(root / "docs" / "notes.md")
    real_stat = os.stat

    def stat_before_the_swap(path, *args, **kwargs):
        return regular if os.fspath(path) == pipe else real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat_before_the_swap)
    exc = refusal(capture, parse_reference("file:swapped"), root=root, field="refs")
    assert str(exc) == (
        "refs: file:swapped is a named pipe, not a file or folder. "
        "Reference a regular file or a folder."
    )


def test_a_file_that_fails_to_read_is_refused_naming_the_error(root, monkeypatch):
    """A disk error while reading (EIO here; root reads past permissions) is one sentence."""

    def failing_read(fd, n):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "read", failing_read)
    exc = refusal(capture, parse_reference("file:docs/notes.md"), root=root, field="refs[4]")
    assert str(exc) == "refs[4]: file:docs/notes.md cannot be read (Input/output error)."
    assert resolve(Reference(kind="file", target="docs/notes.md"), root=root).state == "DANGLING"


# --------------------------------------------------------------------------- through the facade


@pytest.mark.anyio
async def test_a_reference_resolves_in_the_scope_the_reader_asked_for(tmp_path):
    """A granted reader sees a referenced memory of the granted role LIVE; one instance of that
    role hides a memory of another instance, shown as memory:(hidden) without its id."""
    path = tmp_path / "shared.sqlite"
    async with Memory.open(path, owner="bob@ci", embedder=HashEmbedder()) as bob_ci:
        hidden = await bob_ci.author("the ci runner token is in the vault")
    async with Memory.open(path, owner="bob@laptop", embedder=HashEmbedder()) as bob:
        target = await bob.author("bob's laptop builds with make -j8")
        note = await bob.author(
            "bob's build notes", references=[f"memory:{target.id}", f"memory:{hidden.id}"]
        )
    async with Memory.open(path, owner="alice", read=["bob"], embedder=HashEmbedder()) as alice:
        widened = (await alice.get(note.id, scope="bob")).references
        assert [(r.uri, r.state, r.value) for r in widened] == [
            (f"memory:{target.id}", "LIVE", "bob's laptop builds with make -j8"),
            (f"memory:{hidden.id}", "LIVE", "the ci runner token is in the vault"),
        ]
        narrow = (await alice.get(note.id, scope="bob@laptop")).references
        assert [(r.uri, r.state, r.value, r.snapshot_at) for r in narrow] == [
            (f"memory:{target.id}", "LIVE", "bob's laptop builds with make -j8", None),
            ("memory:(hidden)", "HIDDEN", "", None),
        ]


@pytest.mark.anyio
async def test_only_live_memory_references_log_a_deref(rooted, root):
    live = await rooted.author("the on-call phone is in the drawer")
    gone = await rooted.author("the old pager number was 555")
    note = await rooted.author(
        "pager notes",
        references=[f"memory:{live.id}", f"memory:{gone.id}", "file:docs/notes.md"],
    )
    await rooted.forget(gone.id)
    await rooted.recall("pager notes", k=1)
    (_, newest), *_ = await rooted.access_log(live.id)
    assert newest.channel.value == "deref"
    assert "deref" not in [a.channel.value for _, a in await rooted.access_log(gone.id)]
    touched = {memory_id for _, memory_id, _ in await rooted.recent_accesses(limit=50)}
    assert touched <= {live.id, gone.id, note.id}


def slow_reads_of(path: Path, monkeypatch) -> threading.Event:
    """Make reads of one file hang until the returned event is set (a hung mount)."""
    inode = os.stat(path).st_ino
    real_read = os.read
    release = threading.Event()

    def read(fd, n):
        if os.fstat(fd).st_ino == inode:
            release.wait(30)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", read)
    monkeypatch.setattr(refs_service, "READ_SECONDS", 0.05)
    return release


@pytest.mark.anyio
async def test_a_file_on_a_hung_disk_resolves_dangling_with_its_snapshot(rooted, root, monkeypatch):
    note = await rooted.author("release notes", references=["file:docs/notes.md"])
    (stored,) = (await rooted.get(note.id)).references
    release = slow_reads_of(root / "docs" / "notes.md", monkeypatch)
    try:
        (ref,) = (await rooted.get(note.id)).references
    finally:
        release.set()
    assert (ref.uri, ref.state, ref.value) == (
        "file:docs/notes.md",
        "DANGLING",
        "deploy with make release\n",
    )
    assert ref.snapshot_at is not None
    assert ref.note == "the file did not answer within 0.05 s"
    assert stored.state == "LIVE"


@pytest.mark.anyio
async def test_a_reference_to_a_file_on_a_hung_disk_is_refused_at_write(rooted, root, monkeypatch):
    release = slow_reads_of(root / "docs" / "notes.md", monkeypatch)
    try:
        with pytest.raises(InvalidInput) as exc:
            await rooted.author("release notes", references=["file:docs/notes.md"])
    finally:
        release.set()
    assert str(exc.value) == (
        "references: file:docs/notes.md did not answer within 0.05 s. "
        "Reference a file on a responsive disk."
    )
    assert (await rooted.stats()).total == 0


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u200b", "\x07"])
def test_a_path_with_a_line_or_paragraph_separator_or_control_is_refused(char: str) -> None:
    """Line and paragraph separators (Zl, Zp) split a path shown in a reply over lines."""
    with pytest.raises(InvalidInput, match=f"U\\+{ord(char):04X}"):
        parse_reference(f"file:docs/a{char}b.md")
