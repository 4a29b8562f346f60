"""Apply a unified diff to a text, all hunks or none (pure; no I/O).

Models write diffs with wrong line numbers more often than wrong context, so a hunk is
placed where its context and removed lines match: at its stated line if they match there,
else at the nearest line that matches (searching both ways). Hunks are applied in order and
may not overlap. The first hunk that matches nowhere fails the whole patch, named by its
number and header.
"""

from __future__ import annotations

import re

from .._record import Record

__all__ = ["PatchError", "apply_patch"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """The diff is malformed or a hunk does not apply; the message says which."""


class _Hunk(Record):
    number: int
    header: str
    old_start: int
    before: tuple[str, ...]
    after: tuple[str, ...]


def _parse(diff: str) -> list[_Hunk]:
    hunks: list[_Hunk] = []
    lines = diff.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        line = lines[index]
        match = _HUNK.match(line)
        if match is None:
            stripped = line.rstrip("\r\n")
            if hunks and stripped.startswith(("--- ", "+++ ", "diff ")):
                raise PatchError("the diff changes more than one file; send one file per call")
            if hunks and stripped.strip():
                raise PatchError(
                    f"unexpected line after hunk {len(hunks)}: {stripped!r} (or the hunk "
                    "header's line counts are wrong)"
                )
            index += 1  # file headers ("--- a/x", "+++ b/x", "diff --git") and blank lines
            continue
        old_count = int(match.group(2)) if match.group(2) is not None else 1
        new_count = int(match.group(4)) if match.group(4) is not None else 1
        header = line.rstrip("\r\n")
        before: list[str] = []
        after: list[str] = []
        index += 1
        while index < len(lines) and (len(before) < old_count or len(after) < new_count):
            body = lines[index]
            if body.startswith("\\"):  # "\ No newline at end of file": the line before has none
                _strip_newline(before, after, lines[index - 1][:1])
                index += 1
                continue
            tag, text = body[:1], body[1:]
            if tag == " " or body in ("\n", "\r\n"):  # some models drop a blank line's space
                text = text if tag == " " else body
                before.append(text)
                after.append(text)
            elif tag == "-":
                before.append(text)
            elif tag == "+":
                after.append(text)
            else:
                raise PatchError(
                    f"hunk {len(hunks) + 1} ({header}): line {body.rstrip()!r} does not start "
                    "with ' ', '-' or '+', or the header's line counts are wrong"
                )
            index += 1
        if index < len(lines) and lines[index].startswith("\\"):
            _strip_newline(before, after, lines[index - 1][:1])
            index += 1
        if len(before) != old_count or len(after) != new_count:
            raise PatchError(
                f"hunk {len(hunks) + 1} ({header}) ends early: the header promises "
                f"{old_count} old and {new_count} new lines"
            )
        hunks.append(
            _Hunk(
                number=len(hunks) + 1,
                header=header,
                old_start=int(match.group(1)),
                before=tuple(before),
                after=tuple(after),
            )
        )
    if not hunks:
        raise PatchError("the diff has no hunks ('@@ -a,b +c,d @@' headers)")
    return hunks


def _strip_newline(before: list[str], after: list[str], tag: str) -> None:
    targets = {" ": (before, after), "-": (before,), "+": (after,)}.get(tag, ())
    for lines in targets:
        if lines:
            lines[-1] = lines[-1].rstrip("\r\n")


def _matches(lines: list[str], at: int, expected: tuple[str, ...]) -> bool:
    if at < 0 or at + len(expected) > len(lines):
        return False
    # Line endings are not compared: a model writes "\n" diffs for "\r\n" files, and
    # the last line of a file may lack its newline.
    return all(
        actual.rstrip("\r\n") == wanted.rstrip("\r\n")
        for actual, wanted in zip(lines[at:], expected, strict=False)
    )


def apply_patch(text: str, diff: str) -> tuple[str, int]:
    """``text`` with every hunk of ``diff`` applied, and the number of hunks.

    Raises:
        PatchError: the diff is malformed, or a hunk's context and removed lines are found
            nowhere after the previous hunk (the message names the hunk).
    """
    hunks = _parse(diff)
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    output: list[str] = []
    position = 0  # first line of `lines` not yet copied to `output`
    for hunk in hunks:
        wanted = max(hunk.old_start - 1, 0) if hunk.before else hunk.old_start
        found = _find(lines, hunk.before, wanted, position)
        if found is None:
            first = next((line.rstrip() for line in hunk.before if line.strip()), "")
            raise PatchError(
                f"hunk {hunk.number} ({hunk.header}) does not apply: its context and removed "
                f"lines (starting {first!r}) are not in the file after the previous hunk"
            )
        output.extend(lines[position:found])
        replacement = [_with_newline(line, newline) for line in hunk.after]
        at_end = found + len(hunk.before) == len(lines)
        # The file has no final newline and the diff did not say to add one (models rarely
        # write "\ No newline at end of file"): keep it that way.
        if (
            at_end
            and replacement
            and lines
            and not lines[-1].endswith("\n")
            and hunk.before
            and hunk.before[-1].endswith("\n")
        ):
            replacement[-1] = replacement[-1].rstrip("\r\n")
        output.extend(replacement)
        position = found + len(hunk.before)
    output.extend(lines[position:])
    return "".join(output), len(hunks)


def _with_newline(line: str, newline: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2] + newline
    if line.endswith("\n"):
        return line[:-1] + newline
    return line


def _find(lines: list[str], before: tuple[str, ...], wanted: int, start: int) -> int | None:
    """Where ``before`` matches, nearest to ``wanted``, not before ``start``."""
    if not before:  # a pure insertion: at its stated line
        return min(max(wanted, start), len(lines))
    last = len(lines) - len(before)
    for distance in range(0, max(last, 0) + len(lines) + 1):
        for at in (wanted - distance, wanted + distance) if distance else (wanted,):
            if start <= at <= last and _matches(lines, at, before):
                return at
        if wanted - distance < start and wanted + distance > last:
            break
    return None
