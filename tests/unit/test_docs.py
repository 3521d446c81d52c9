"""The documentation stays true to the tree.

Every `.md` document a comment or docstring cites is in the repository, every section of
`docs/provider-signals.md` a citing file names is a heading there, and the README's package
map and the routing README list what their folders hold, and the README tells the
package layers in the order the import contract enforces them.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "rungway"
SIGNALS = ROOT / "docs" / "provider-signals.md"
SCANNED = ("src", "tests", "bench")
HASH_COMMENTED = (".yaml", ".yml", ".toml", ".sh")

_CITED_DOC = re.compile(r"[\w./-]+\.md\b")
# A document cited by an all-capitals name followed by a section number.
_NAMED_DOC = re.compile(r"\b([A-Z][A-Z_-]{2,}) section \d")
_SECTION = re.compile(r"\b([AB][1-9](?:\.\d{1,2})?)\b")
_HEADING = re.compile(r"^#{2,}\s+([AB][1-9](?:\.\d{1,2})?)\b", re.MULTILINE)


def _prose(path: Path) -> str:
    """The comments and docstrings of a source file, or the whole of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return text
    if path.suffix in HASH_COMMENTED:
        return "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    parts = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    ]
    # Docstrings, and the string statements that document an attribute.
    parts.extend(
        node.value.value
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )
    return "\n".join(parts)


@cache
def _scanned() -> tuple[tuple[Path, str], ...]:
    """Each scanned file with its prose, read once for every test here."""
    return tuple(
        (path, _prose(path))
        for top in SCANNED
        for path in sorted((ROOT / top).rglob("*"))
        if path.is_file() and path.suffix in (".py", ".md", *HASH_COMMENTED)
    )


def _cites(path: Path, name: str) -> bool:
    name = name.removeprefix("./")
    return any((base / name).is_file() for base in (ROOT, ROOT / "docs", path.parent))


def test_every_cited_document_is_in_the_repository() -> None:
    missing = []
    for path, prose in _scanned():
        where = path.relative_to(ROOT)
        missing += [f"{where}: {m}" for m in _CITED_DOC.findall(prose) if not _cites(path, m)]
        missing += [
            f"{where}: {name}"
            for name in _NAMED_DOC.findall(prose)
            if not _cites(path, f"{name}.md")
        ]
    assert not missing, "documents cited but not in the repository:\n" + "\n".join(missing)


def test_every_cited_provider_signals_section_exists() -> None:
    headings = set(_HEADING.findall(SIGNALS.read_text(encoding="utf-8")))
    unknown = []
    for path, prose in _scanned():
        if "provider-signals.md" in prose:
            where = path.relative_to(ROOT)
            unknown += [f"{where}: {s}" for s in _SECTION.findall(prose) if s not in headings]
    assert not unknown, "sections not in docs/provider-signals.md:\n" + "\n".join(unknown)


def _entries(folder: Path) -> set[str]:
    """A folder's modules, data files and subfolders (`name/`), without its README.

    A subfolder that holds nothing but bytecode caches is what a removed package leaves
    behind, not an entry.
    """
    return {
        f"{entry.name}/" if entry.is_dir() else entry.name
        for entry in folder.iterdir()
        if not entry.name.startswith(("__", "."))
        and entry.name != "README.md"
        and (not entry.is_dir() or any(c.name != "__pycache__" for c in entry.iterdir()))
    }


def test_readme_package_map_lists_every_top_level_entry() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    development = readme.split("\n## Development\n", 1)[1]
    block = development.split("```", 2)[1]
    assert block.lstrip("\n").startswith("src/rungway/")
    listed = set(re.findall(r"^  (\S+)", block, re.MULTILINE))
    assert listed == _entries(PACKAGE)


def test_readme_tells_the_layers_the_import_contract_enforces() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    told = " ".join(readme.split("\nThe packages are layered", 1)[1].split("\n\n", 1)[0].split())
    told = told.split("From the top:", 1)[1].split("A package imports", 1)[0]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = (
        contract["layers"]
        for contract in pyproject["tool"]["importlinter"]["contracts"]
        if contract["type"] == "layers" and contract["containers"] == ["rungway"]
    )
    enforced = [[name.strip() for name in layer.split("|")] for layer in layers]
    assert [re.findall(r"`(\w+)`", layer) for layer in told.split(";")] == [
        layer for layer in enforced if layer != ["__main__"]
    ]


def test_routing_readme_lists_every_module() -> None:
    routing = PACKAGE / "routing"
    readme = (routing / "README.md").read_text(encoding="utf-8")
    assert set(re.findall(r"^- `([\w.]+)`", readme, re.MULTILINE)) == _entries(routing)
