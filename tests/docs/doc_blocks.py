"""Reading the code blocks of README.md and docs/*.md for ``test_doc_blocks``.

A file's ```python blocks run in order in one fresh interpreter, like a notebook (a block may use
names an earlier block made). Context a fragment leaves to the reader (data ``x, y``, a ``step``)
comes from hidden setup written in the Markdown itself, so the page says what it runs:

    <!-- doc-setup
    x = torch.randn(64, 1); y = 2 * x
    -->

placed before the block that needs it (it runs just before that block). A block that cannot run
here says why in a comment just before it: ``<!-- doc-skip: needs two hosts -->``; one that must
start a new interpreter (it configures devices, which freezes at first use) is preceded by
``<!-- doc-fresh -->``.

"Prints what the text says": a line ``expression  # expected`` whose comment starts with a value
(a literal, ``tensor(``, ``torch.Size(``, ``PerReplica``...) is checked: ``repr`` of the expression's
value must start with the comment's text up to the first ``;`` or two spaces.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\s*$")
_SETUP = re.compile(r"<!--\s*doc-setup\s*\n(.*?)-->", re.S)
_SKIP = re.compile(r"<!--\s*doc-skip:\s*(.*?)\s*-->")
_FRESH = re.compile(r"<!--\s*doc-fresh\s*-->")
_VALUE_START = re.compile(r"^(tensor\(|torch\.Size\(|\[|\(|\{|-?\d|True\b|False\b|None\b|'|\"|PerReplica|Mirrored)")


@dataclasses.dataclass
class Block:
    """One fenced block: its language, code, first line number, setup code and skip reason."""

    path: Path
    line: int
    language: str
    code: str
    setup: str = ""
    skip: str | None = None
    fresh: bool = False

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` with the setup/skip comments that precede each."""
    lines = path.read_text().splitlines()
    found, pending_setup, pending_skip, i = [], [], None, 0
    text_since = []
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            text_since.append(lines[i])
            i += 1
            continue
        preceding = "\n".join(text_since)
        pending_setup = [m.group(1) for m in _SETUP.finditer(preceding)]
        skip = _SKIP.search(preceding)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        found.append(Block(path, start, match.group(1), "\n".join(body) + "\n", "\n".join(pending_setup),
                           skip.group(1) if skip else None, bool(_FRESH.search(preceding))))
        text_since = []
        i += 1
    return found


def segments(path: Path) -> list[list[Block]]:
    """The runnable python blocks of ``path``, grouped into interpreters (split at doc-fresh)."""
    groups: list[list[Block]] = [[]]
    for block in blocks(path):
        if block.language != "python" or block.skip:
            continue
        if block.fresh and groups[-1]:
            groups.append([])
        groups[-1].append(block)
    return [g for g in groups if g]


def expected_value(comment: str) -> str | None:
    """The value a ``# comment`` states (up to its balanced closing bracket, or its first word), or
    None when the comment is prose."""
    text = comment.strip()
    if not _VALUE_START.match(text):
        return None
    depth, quote = 0, None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[: i + 1]
        elif depth == 0 and (ch.isspace() or ch in ";,"):
            return text[:i]
    return text


def instrument(code: str, block: str) -> str:
    """``code`` with every ``expression  # value`` line turned into a check of the value's repr."""
    tree = ast.parse(code)
    lines = code.splitlines()
    checks: dict[int, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Expr) or node.end_lineno != node.lineno:
            continue
        line = lines[node.lineno - 1]
        if "#" not in line[node.end_col_offset:]:
            continue
        want = expected_value(line[node.end_col_offset:].split("#", 1)[1])
        if want is None:
            continue
        value = node.value
        printed = (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print"
                   and len(value.args) == 1 and not value.keywords)
        expr = ast.get_source_segment(code, value.args[0] if printed else value)
        checks[node.lineno] = (f"_doc_check({expr}, {want!r}, {block + ':' + str(node.lineno)!r}, {printed!r})")
    out = []
    for number, line in enumerate(lines, 1):
        if number in checks:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(indent + checks[number])
        else:
            out.append(line)
    return "\n".join(out) + "\n"


CHECK_SOURCE = '''
def _doc_check(value, want, where, printed=False):
    if printed:
        print(value)
    got = str(value) if printed else repr(value)
    norm = lambda s: " ".join(s.replace("\\n", " ").split())
    if not norm(got).startswith(norm(want)):
        raise AssertionError(f"{where}: the text says {want!r}, the code gives {got!r}")
'''
