"""The file tools: containment, protected paths, atomic writes, edits and patches."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
import trio.testing

from kova import ToolResult
from kova.tools import ToolPolicy, builtin_tools
from kova.tools._workspace import PathRefused, Workspace

if TYPE_CHECKING:
    from kova import JSONValue
    from kova.tools import Tool


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a few files, and a sibling directory outside it holding a secret."""
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret\n")
    (root / "hello.txt").write_text("one\ntwo\nthree\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    return root, outside


def tools_for(policy: ToolPolicy) -> dict[str, Tool]:
    return {tool.name: tool for tool in builtin_tools(policy)}


async def call(policy: ToolPolicy, name: str, **arguments: JSONValue) -> ToolResult:
    return await tools_for(policy)[name].execute(arguments)


# -- read_file ------------------------------------------------------------------------------


async def test_read_file_returns_the_text(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(ToolPolicy(workspace_root=root), "read_file", path="hello.txt")
    assert result == ToolResult(content="one\ntwo\nthree\n")


async def test_read_file_returns_a_line_range(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(
        ToolPolicy(workspace_root=root), "read_file", path="hello.txt", start_line=2, end_line=3
    )
    assert result.text == "two\nthree\n"


async def test_read_file_past_the_end_is_an_error(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    policy = ToolPolicy(workspace_root=root)
    result = await call(policy, "read_file", path="hello.txt", start_line=9)
    assert result.is_error
    assert "past the end" in result.text


async def test_read_file_refuses_binary_files_in_band(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "blob.bin").write_bytes(b"\x89PNG\0\0\0\rIHDR")
    result = await call(ToolPolicy(workspace_root=root), "read_file", path="blob.bin")
    assert result.is_error
    assert "binary file" in result.text


async def test_read_file_stops_at_the_size_cap_and_says_where_to_continue(
    layout: tuple[Path, Path],
) -> None:
    root, _ = layout
    (root / "big.txt").write_text("".join(f"line {n}\n" for n in range(1000)))
    policy = ToolPolicy(workspace_root=root, max_read_bytes=100)
    result = await call(policy, "read_file", path="big.txt")
    assert not result.is_error
    assert result.text.startswith("line 0\nline 1\n")
    assert "[truncated:" in result.text
    assert "continue with start_line=" in result.text
    assert len(result.text) < 300


async def test_missing_file_is_an_error_result(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(ToolPolicy(workspace_root=root), "read_file", path="nope.txt")
    assert result.is_error
    assert "not found" in result.text


# -- containment ----------------------------------------------------------------------------


@attrs.frozen
class Escape:
    name: str
    path: str


ESCAPES = [
    Escape("dotdot", "../outside/secret.txt"),
    Escape("dotdot_inside_first", "src/../../outside/secret.txt"),
    Escape("absolute_outside", "{outside}/secret.txt"),
    Escape("file_symlink", "link_to_secret.txt"),
    Escape("directory_symlink", "link_to_outside/secret.txt"),
]


@pytest.mark.parametrize("case", ESCAPES, ids=[case.name for case in ESCAPES])
@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "list_dir"])
async def test_paths_that_escape_the_workspace_are_refused(
    layout: tuple[Path, Path], case: Escape, tool: str
) -> None:
    root, outside = layout
    (root / "link_to_secret.txt").symlink_to(outside / "secret.txt")
    (root / "link_to_outside").symlink_to(outside)
    path = case.path.format(outside=outside)
    arguments: dict[str, JSONValue] = {"path": path}
    if tool == "write_file":
        arguments["content"] = "pwned"
    if tool == "edit_file":
        arguments |= {"old_string": "outside", "new_string": "pwned"}
    result = await tools_for(ToolPolicy(workspace_root=root))[tool].execute(arguments)
    assert result.is_error
    assert result.text.startswith("refused:")
    assert "outside the workspace" in result.text
    assert (outside / "secret.txt").read_text() == "outside secret\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_absolute_path_inside_the_workspace_is_allowed(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(ToolPolicy(workspace_root=root), "read_file", path=str(root / "hello.txt"))
    assert result.text == "one\ntwo\nthree\n"


async def test_symlink_that_stays_inside_is_allowed(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "alias.txt").symlink_to(root / "hello.txt")
    result = await call(ToolPolicy(workspace_root=root), "read_file", path="alias.txt")
    assert result.text == "one\ntwo\nthree\n"


def test_directory_swapped_for_a_symlink_after_the_check_is_refused(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    (root / "data").mkdir()
    (root / "data" / "secret.txt").write_text("inside\n")
    workspace = Workspace.from_policy(ToolPolicy(workspace_root=root))
    checked = workspace.resolve("data/secret.txt")
    # The race: between the check and the open, the directory becomes a symlink out.
    (root / "data" / "secret.txt").unlink()
    (root / "data").rmdir()
    (root / "data").symlink_to(outside)
    with pytest.raises(PathRefused, match="changed after it was checked"):
        workspace.open("data/secret.txt", checked, os.O_RDONLY)


def test_file_swapped_for_a_symlink_after_the_check_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    workspace = Workspace.from_policy(ToolPolicy(workspace_root=root))
    checked = workspace.resolve("hello.txt")
    (root / "hello.txt").unlink()
    (root / "hello.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PathRefused, match="became a symlink"):
        workspace.open("hello.txt", checked, os.O_RDONLY)


def test_parent_swapped_before_a_write_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "out").mkdir()
    workspace = Workspace.from_policy(ToolPolicy(workspace_root=root))
    checked = workspace.resolve("out/new.txt")
    (root / "out").rmdir()
    (root / "out").symlink_to(outside)
    with pytest.raises(PathRefused):
        workspace.prepare_write("out/new.txt", checked, b"pwned")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


# -- protected paths ------------------------------------------------------------------------


@pytest.fixture
def protected(layout: tuple[Path, Path]) -> ToolPolicy:
    root, _ = layout
    (root / ".secrets").mkdir()
    (root / ".secrets" / "key.txt").write_text("TOKEN=hunter2\n")
    (root / "key_alias.txt").symlink_to(root / ".secrets" / "key.txt")
    return ToolPolicy(workspace_root=root, protected_paths=[root / ".secrets"])


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": ".secrets/key.txt"}),
        ("read_file", {"path": "key_alias.txt"}),
        ("write_file", {"path": ".secrets/new.txt", "content": "x"}),
        ("edit_file", {"path": ".secrets/key.txt", "old_string": "TOKEN", "new_string": "X"}),
        ("list_dir", {"path": ".secrets"}),
    ],
)
async def test_protected_paths_are_refused(
    protected: ToolPolicy, tool: str, arguments: dict[str, JSONValue]
) -> None:
    result = await tools_for(protected)[tool].execute(arguments)
    assert result.is_error
    assert "protected path" in result.text
    assert protected.workspace_root is not None
    secrets = protected.workspace_root / ".secrets"
    assert sorted(os.listdir(secrets)) == ["key.txt"]
    assert (secrets / "key.txt").read_text() == "TOKEN=hunter2\n"


async def test_protected_paths_are_left_out_of_listings_and_searches(
    protected: ToolPolicy,
) -> None:
    listing = await call(protected, "list_dir", path=".", depth=3)
    assert ".secrets" not in listing.text
    hits = await call(protected, "search", pattern="hunter2")
    assert hits.text == "no matches"


# -- write_file -----------------------------------------------------------------------------


async def test_write_file_creates_parents_and_keeps_the_mode(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    policy = ToolPolicy(workspace_root=root)
    result = await call(policy, "write_file", path="new/deep/file.txt", content="hi\n")
    assert result.text == "wrote 3 bytes to new/deep/file.txt"
    assert (root / "new" / "deep" / "file.txt").read_text() == "hi\n"
    script = root / "run.sh"
    script.write_text("old\n")
    script.chmod(0o751)
    await call(policy, "write_file", path="run.sh", content="new\n")
    assert script.read_text() == "new\n"
    assert script.stat().st_mode & 0o777 == 0o751
    assert not [name for name in os.listdir(root) if name.endswith(".kova-tmp")]


async def test_write_cancelled_before_it_starts_leaves_the_old_file(
    layout: tuple[Path, Path],
) -> None:
    root, _ = layout
    with trio.CancelScope() as scope:
        scope.cancel()
        await call(ToolPolicy(workspace_root=root), "write_file", path="hello.txt", content="x")
    assert scope.cancelled_caught
    assert (root / "hello.txt").read_text() == "one\ntwo\nthree\n"


async def test_write_cancelled_while_the_temporary_file_is_written_leaves_the_old_file(
    layout: tuple[Path, Path],
) -> None:
    root, _ = layout
    target = root / "hello.txt"
    policy = ToolPolicy(workspace_root=root, max_write_bytes=200_000_000)
    content = "x" * 60_000_000
    # Cancelled once the temporary file exists, mid-write: the rename must not happen.
    seen_temporary = False
    async with trio.open_nursery() as nursery:

        async def write() -> None:
            await call(policy, "write_file", path="hello.txt", content=content)

        nursery.start_soon(write)
        with trio.fail_after(60):
            while not seen_temporary:
                await trio.testing.wait_all_tasks_blocked()
                seen_temporary = any(name.endswith(".kova-tmp") for name in os.listdir(root))
        nursery.cancel_scope.cancel()
    assert target.read_text() == "one\ntwo\nthree\n"
    assert not [name for name in os.listdir(root) if name.endswith(".kova-tmp")]


# -- edit_file ------------------------------------------------------------------------------


async def test_edit_file_replaces_a_unique_match(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(
        ToolPolicy(workspace_root=root),
        "edit_file",
        path="src/app.py",
        old_string="return 1",
        new_string="return 2",
    )
    assert result.text == "replaced 1 occurrence in src/app.py"
    assert (root / "src" / "app.py").read_text() == "def main():\n    return 2\n"


async def test_edit_file_refuses_an_ambiguous_match_and_says_how_many(
    layout: tuple[Path, Path],
) -> None:
    root, _ = layout
    (root / "dup.txt").write_text("x = 1\ny = 1\n")
    policy = ToolPolicy(workspace_root=root)
    result = await call(policy, "edit_file", path="dup.txt", old_string="= 1", new_string="= 2")
    assert result.is_error
    assert "matches 2 times" in result.text
    assert (root / "dup.txt").read_text() == "x = 1\ny = 1\n"
    result = await call(
        policy, "edit_file", path="dup.txt", old_string="= 1", new_string="= 2", replace_all=True
    )
    assert result.text == "replaced 2 occurrences in dup.txt"
    assert (root / "dup.txt").read_text() == "x = 2\ny = 2\n"


async def test_edit_file_reports_a_missing_match(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(
        ToolPolicy(workspace_root=root),
        "edit_file",
        path="hello.txt",
        old_string="four",
        new_string="4",
    )
    assert result.is_error
    assert "0 matches" in result.text


# -- patch_file -----------------------------------------------------------------------------

ORIGINAL = "".join(f"line {n}\n" for n in range(1, 21))


async def test_patch_file_applies_every_hunk(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "f.txt").write_text(ORIGINAL)
    diff = (
        "--- a/f.txt\n+++ b/f.txt\n"
        "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE THREE\n line 4\n"
        "@@ -17,3 +17,4 @@\n line 17\n line 18\n+inserted\n line 19\n"
    )
    result = await call(ToolPolicy(workspace_root=root), "patch_file", path="f.txt", diff=diff)
    assert result.text == "applied 2 hunks to f.txt"
    expected = ORIGINAL.replace("line 3\n", "LINE THREE\n").replace(
        "line 18\n", "line 18\ninserted\n"
    )
    assert (root / "f.txt").read_text() == expected


async def test_patch_file_tolerates_wrong_line_numbers(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "f.txt").write_text(ORIGINAL)
    diff = "@@ -9,2 +9,2 @@\n line 12\n-line 13\n+thirteen\n"
    result = await call(ToolPolicy(workspace_root=root), "patch_file", path="f.txt", diff=diff)
    assert not result.is_error, result.text
    assert "thirteen\nline 14\n" in (root / "f.txt").read_text()


async def test_patch_file_applies_nothing_when_one_hunk_fails(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "f.txt").write_text(ORIGINAL)
    diff = (
        "@@ -2,2 +2,2 @@\n line 2\n-line 3\n+LINE THREE\n"
        "@@ -10,2 +10,2 @@\n line 10\n-line eleven\n+line 11!\n"
    )
    result = await call(ToolPolicy(workspace_root=root), "patch_file", path="f.txt", diff=diff)
    assert result.is_error
    assert "hunk 2 (@@ -10,2 +10,2 @@) does not apply" in result.text
    assert "file unchanged" in result.text
    assert (root / "f.txt").read_text() == ORIGINAL


async def test_patch_file_reports_a_malformed_diff(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(
        ToolPolicy(workspace_root=root), "patch_file", path="hello.txt", diff="just words"
    )
    assert result.is_error
    assert "no hunks" in result.text


# -- list_dir and search --------------------------------------------------------------------


async def test_list_dir_lists_to_a_depth_and_caps_entries(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    policy = ToolPolicy(workspace_root=root)
    assert (await call(policy, "list_dir")).text == "hello.txt\nsrc/"
    assert (await call(policy, "list_dir", depth=2)).text == "hello.txt\nsrc/\n  app.py"
    for n in range(5):
        (root / f"extra{n}.txt").write_text("")
    capped = await call(attrs.evolve(policy, max_entries=3), "list_dir")
    assert capped.text.endswith("[truncated after 3 entries]")
    assert capped.text.count("\n") == 3


async def test_search_honours_gitignore_and_skips_binaries(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("needle in build\n")
    (root / "debug.log").write_text("needle in log\n")
    (root / "src" / ".gitignore").write_text("generated.py\n")
    (root / "src" / "generated.py").write_text("needle generated\n")
    (root / "src" / "real.py").write_text("x = 1\nneedle = 2\n")
    (root / "blob.bin").write_bytes(b"needle\0\0")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("needle in git\n")
    result = await call(ToolPolicy(workspace_root=root), "search", pattern="needle")
    assert result.text == "src/real.py:2: needle = 2"


async def test_search_filters_by_glob_and_case(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    policy = ToolPolicy(workspace_root=root)
    result = await call(policy, "search", pattern="DEF MAIN", ignore_case=True, glob="*.py")
    assert result.text == "src/app.py:1: def main():"
    assert (await call(policy, "search", pattern="one", glob="*.py")).text == "no matches"


async def test_search_output_is_capped_with_a_marker(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "many.txt").write_text("hit\n" * 50)
    result = await call(ToolPolicy(workspace_root=root, max_entries=10), "search", pattern="hit")
    assert result.text.count("\n") == 10
    assert result.text.endswith("[truncated: more matches; narrow the pattern, path or glob]")


async def test_search_reports_an_invalid_regex(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call(ToolPolicy(workspace_root=root), "search", pattern="(unclosed")
    assert result.is_error
    assert "invalid regular expression" in result.text


# -- policy ---------------------------------------------------------------------------------


def test_policy_validates_its_fields(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shell_timeout"):
        ToolPolicy(workspace_root=tmp_path, shell_timeout=0)
    with pytest.raises(ValueError, match="not a valid environment variable name"):
        ToolPolicy(workspace_root=tmp_path, shell_env={"A=B": "x"})
    with pytest.raises(TypeError):
        ToolPolicy()  # type: ignore[call-arg]  # unconfined must be said
    policy = ToolPolicy(workspace_root="relative/dir", protected_paths="/etc")
    assert policy.workspace_root == Path.cwd() / "relative" / "dir"
    assert policy.protected_paths == (Path("/etc"),)
    assert ToolPolicy.unconfined().workspace_root is None


async def test_workspace_root_that_does_not_exist_is_an_error_result(tmp_path: Path) -> None:
    result = await call(ToolPolicy(workspace_root=tmp_path / "gone"), "read_file", path="x")
    assert result.is_error
    assert "is not a directory" in result.text


async def test_unconfined_policy_reads_anywhere(layout: tuple[Path, Path]) -> None:
    _, outside = layout
    result = await call(ToolPolicy.unconfined(), "read_file", path=str(outside / "secret.txt"))
    assert result.text == "outside secret\n"


# -- issue 29: FIFOs, devices, hard links, parents made through descriptors, policy types ----


@pytest.mark.parametrize("tool", ["read_file", "edit_file", "patch_file"])
async def test_a_named_pipe_is_refused_at_once(layout: tuple[Path, Path], tool: str) -> None:
    root, _ = layout
    os.mkfifo(root / "pipe")  # no writer: opening it for reading would block forever
    arguments: dict[str, JSONValue] = {
        "read_file": {},
        "edit_file": {"old_string": "a", "new_string": "b"},
        "patch_file": {"diff": "@@ -1 +1 @@\n-a\n+b\n"},
    }[tool]
    with trio.fail_after(10):  # wall clock: a blocking open would hang the worker thread
        result = await call(ToolPolicy(workspace_root=root), tool, path="pipe", **arguments)
    assert result.is_error
    assert "named pipe (FIFO)" in result.text


async def test_writing_over_a_named_pipe_is_refused(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    os.mkfifo(root / "pipe")
    with trio.fail_after(10):
        result = await call(ToolPolicy(workspace_root=root), "write_file", path="pipe", content="x")
    assert result.is_error
    assert "named pipe" in result.text
    assert (root / "pipe").is_fifo()


async def test_a_pipe_swapped_in_after_the_check_is_refused_without_blocking(
    layout: tuple[Path, Path],
) -> None:
    root, _ = layout
    workspace = Workspace.from_policy(ToolPolicy(workspace_root=root))
    checked = workspace.resolve("hello.txt")
    (root / "hello.txt").unlink()
    os.mkfifo(root / "hello.txt")
    with pytest.raises(PathRefused, match="named pipe"):
        workspace.open("hello.txt", checked, os.O_RDONLY)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
async def test_device_files_are_refused(device: str) -> None:
    with trio.fail_after(10):
        result = await call(ToolPolicy.unconfined(), "read_file", path=device)
    assert result.is_error
    assert "device file" in result.text


async def test_a_socket_and_a_pipe_named_gitignore_are_passed_over_by_search(
    layout: tuple[Path, Path],
) -> None:
    root, _ = layout
    os.mkfifo(root / ".gitignore")
    listener = trio.socket.socket(trio.socket.AF_UNIX)
    await listener.bind(str(root / "sock"))
    try:
        with trio.fail_after(10):
            found = await call(ToolPolicy(workspace_root=root), "search", pattern="two")
            read = await call(ToolPolicy(workspace_root=root), "read_file", path="sock")
    finally:
        listener.close()
    assert "hello.txt:2: two" in found.text
    assert read.is_error
    assert "a socket" in read.text


@pytest.mark.parametrize("tool", ["read_file", "edit_file", "search"])
async def test_a_hard_link_to_a_file_outside_is_refused(
    layout: tuple[Path, Path], tool: str
) -> None:
    root, outside = layout
    os.link(outside / "secret.txt", root / "innocent.txt")
    arguments: dict[str, JSONValue] = {
        "read_file": {"path": "innocent.txt"},
        "edit_file": {"path": "innocent.txt", "old_string": "outside", "new_string": "x"},
        "search": {"pattern": "outside secret"},
    }[tool]
    result = await call(ToolPolicy(workspace_root=root), tool, **arguments)
    assert "outside secret" not in result.text
    if tool != "search":
        assert result.is_error
        assert "2 hard links" in result.text
    assert (outside / "secret.txt").read_text() == "outside secret\n"


async def test_a_hard_link_to_a_protected_file_is_refused(protected: ToolPolicy) -> None:
    assert protected.workspace_root is not None
    os.link(protected.workspace_root / ".secrets" / "key.txt", protected.workspace_root / "k")
    result = await call(protected, "read_file", path="k")
    assert result.is_error
    assert "hunter2" not in result.text


async def test_hard_links_are_read_when_the_policy_allows_them(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    os.link(root / "hello.txt", root / "hello-again.txt")
    policy = ToolPolicy(workspace_root=root, allow_hard_links=True)
    result = await call(policy, "read_file", path="hello-again.txt")
    assert result.text == "one\ntwo\nthree\n"


def test_missing_parents_under_a_swapped_symlink_are_not_created_outside(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    workspace = Workspace.from_policy(ToolPolicy(workspace_root=root))
    checked = workspace.resolve("a/b/c/new.txt")
    # The race: after the check, the first missing directory appears as a symlink out.
    (root / "a").symlink_to(outside)
    with pytest.raises(PathRefused):
        workspace.prepare_write("a/b/c/new.txt", checked, b"pwned")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_write_file_racing_a_symlink_swap_never_creates_anything_outside(
    layout: tuple[Path, Path],
) -> None:
    import shutil
    import threading
    import time

    root, outside = layout
    policy = ToolPolicy(workspace_root=root)
    stop = threading.Event()

    def swap() -> None:
        # Flip root/a between a missing entry and a symlink out, as fast as possible; a real
        # directory a write made there is removed (rmtree never follows a symlink).
        link = root / "a"
        while not stop.is_set():
            try:
                link.symlink_to(outside)
                time.sleep(0.0005)
                link.unlink()
                time.sleep(0.0005)
            except FileExistsError:
                shutil.rmtree(link, ignore_errors=True)
            except OSError:
                pass

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for attempt in range(150):
            await call(policy, "write_file", path=f"a/b{attempt}/new.txt", content="x")
    finally:
        stop.set()
        swapper.join()
    assert sorted(os.listdir(outside)) == ["secret.txt"]


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"workspace_root": ""}, ValueError, "workspace_root must not be empty"),
        ({"workspace_root": 5}, TypeError, "workspace_root must be a path"),
        ({"protected_paths": [""]}, ValueError, "protected_paths must not be empty"),
        ({"protected_paths": 3}, TypeError, "protected_paths"),
        ({"shell_timeout": float("inf")}, ValueError, "shell_timeout must be a positive, finite"),
        ({"shell_timeout": "60"}, TypeError, "seconds"),
        ({"shell_env": [("A", "b")]}, TypeError, "shell_env must be a mapping"),
        ({"web": {"https_only": False}}, TypeError, "web"),
        ({"max_read_bytes": 1.0}, TypeError, "max_read_bytes must be an int"),
        ({"max_entries": 0}, ValueError, "max_entries"),
        ({"allow_hard_links": "yes"}, TypeError, "allow_hard_links must be True or False"),
    ],
)
def test_every_tool_policy_field_is_type_checked(
    tmp_path: Path, fields: dict[str, object], error: type[Exception], match: str
) -> None:
    settings: dict[str, object] = {"workspace_root": tmp_path, **fields}
    with pytest.raises(error, match=match):
        ToolPolicy(**settings)  # type: ignore[arg-type]
