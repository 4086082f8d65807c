"""The docs name only what exists: every repository path, `make` target, `inquire` verb and `pipeline.` name
that README.md and docs/guide.md name is checked against the tree, the Makefile, the CLI's parser and
`inquire_lib.pipeline`. Each check is a function of a doc's text that returns what it names and cannot find."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/guide.md")

# Exempt: what a run writes rather than what the repository holds. The run folders themselves and what lies
# inside a run or checkpoint folder (metrics/, eval/, ...) exist only once a run has made them.
OUTPUTS = {"papermill_runs", "figures", "artifacts", ".cache", "metrics", "eval", "logs", "validation", "final"}
# Exempt too: the folder a command is told to write (`inquire build --out data/ib`).
OUT_FLAGS = {"--out", "-o"}
PATH = re.compile(r"\.?[\w-]+/[\w./<>*{},-]*")  # relative, with a folder: `tools/gpu_check.sh`, `viz/plots`
ENTRY = re.compile(r"[\w.<>*-]+(/[\w.<>*-]+)*/?")  # a name at the start of a line of a map


def code(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The doc's fenced blocks as (info string, body) and its inline code spans."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
    spans = re.findall(r"`([^`]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    return blocks, spans


def _clean(token: str) -> str:
    token = token.strip("()[],;:'\"").rstrip(".")
    return re.sub(r"(\.\w+):\w+$", r"\1", token)  # `export_verl.py:compute_score` names a file


def _exists(path: str) -> bool:
    """A path from the repository root, or a module path inside the library (`viz/plots`, `world/*`)."""
    if "<" in path or path.split("/")[0] in OUTPUTS:  # a placeholder, or what a run writes
        return True
    for base in (ROOT, ROOT / "inquire_lib"):
        if "*" in path and any(base.glob(path)) or (base / path).exists() or (base / f"{path}.py").exists():
            return True
    return False


def _map_entries(body: str) -> list[str]:
    """The names a map lists (an unlabelled block: `inquire_lib/` with `world/` under it), each placed under
    the folder above it by its indent."""
    entries, folders = [], []  # folders: (indent, path) of the open folders
    for line in body.splitlines():
        first = _clean(line.split()[0]) if line.strip() else ""
        if not ENTRY.fullmatch(first) or not ("/" in first or re.search(r"\.\w+$", first)):
            continue  # prose continuing the line above
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = (folders[-1][1] if folders else "") + first
        entries.append(path)
        if path.endswith("/"):
            folders.append((indent, path))
    return entries


def missing_paths(text: str, doc_dir: Path = ROOT) -> list[str]:
    """Paths the text names that are not in the repository: link targets (from the doc's folder, with their
    anchor), paths with a folder in code spans and blocks, and the entries of its maps (from the root). A bare
    file name (`manifest.json`) is checked only as a map's entry, where its folder is known."""
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path, _, anchor = target.partition("#")
        if re.match(r"\w+:", target) or not path:
            continue  # a URL, or an anchor in the same doc
        file = doc_dir / path
        if not file.exists() or anchor and anchor not in _anchors(file.read_text()):
            missing.append(target)
    blocks, chunks = code(text)
    for info, body in blocks:
        lines = body.splitlines()
        if not info:  # a map: its entries are placed by their indent, the rest of each line read as code
            missing += [p for p in _map_entries(body) if not _exists(p)]
            lines = [" ".join(line.split()[1:]) for line in lines]
        chunks += lines
    for chunk in chunks:
        tokens = chunk.split()
        for before, token in zip([""] + tokens, tokens):
            token = _clean(token)
            if PATH.fullmatch(token) and before not in OUT_FLAGS and not _exists(token):
                missing.append(token)
    return sorted(set(missing))


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a doc's headings."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.M)
    return {re.sub(r"[^\w -]", "", h.lower()).replace(" ", "-") for h in headings}


def _in_code(pattern: str, text: str) -> set[str]:
    """What `pattern` captures in the text's code spans and blocks."""
    blocks, spans = code(text)
    return {m for chunk in spans + [body for _, body in blocks] for m in re.findall(pattern, chunk)}


def missing_targets(text: str) -> list[str]:
    """`make <target>` names in code that are no rule of the Makefile."""
    makefile = (ROOT / "Makefile").read_text()
    rules = {t for line in re.findall(r"^([\w .-]+?)\s*:(?!=)", makefile, flags=re.M) for t in line.split()}
    return sorted(_in_code(r"(?<![\w-])make\s+([a-z][\w-]*)", text) - rules)


def missing_verbs(text: str) -> list[str]:
    """`inquire <verb>` names in code that are no subcommand of the CLI."""
    from inquire_lib.cli import _parser

    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(_in_code(r"(?<![\w-])inquire\s+([a-z][\w-]*)", text) - set(sub.choices))


def missing_pipeline_names(text: str) -> list[str]:
    """`pipeline.<name>` (or `pipeline.<name>.<attr>`) names anywhere in the text that the module lacks;
    `pipeline.py` is the file."""
    import inquire_lib.pipeline as pipeline

    names = set(re.findall(r"(?<![\w.])(?:inquire_lib\.)?pipeline\.(?!py\b)(\w+(?:\.\w+)*)", text))
    return sorted(f"pipeline.{dotted}" for dotted in names if not _has(pipeline, dotted.split(".")))


def _has(obj, attrs: list[str]) -> bool:
    return not attrs or hasattr(obj, attrs[0]) and _has(getattr(obj, attrs[0]), attrs[1:])


def _read(doc: str) -> str:
    return (ROOT / doc).read_text()


@pytest.mark.parametrize("doc", DOCS)
def test_named_paths_exist(doc):
    missing = missing_paths(_read(doc), (ROOT / doc).parent)
    assert not missing, f"{doc} names paths that are not in the repository: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_named_make_targets_exist(doc):
    missing = missing_targets(_read(doc))
    assert not missing, f"{doc} names make targets the Makefile lacks: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_named_inquire_verbs_exist(doc):
    missing = missing_verbs(_read(doc))
    assert not missing, f"{doc} names inquire verbs the CLI lacks: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_named_pipeline_names_exist(doc):
    missing = missing_pipeline_names(_read(doc))
    assert not missing, f"{doc} names pipeline attributes that do not exist: {missing}"


# One bogus name of each kind beside real ones.
BOGUS = """
See [the log](docs/lab/log.md), [a lost page](docs/lab/lost.md) and [the map](README.md#no-such-heading).
`tools/gpu_check.sh`, `tools/no_such_tool.py`, `viz/plots`, `viz/no_such_module`, `papermill_runs/<profile>/x`.
```
inquire_lib/
  world/       the phone
  no_such_package/   a folder the map names
```
```bash
make lint && make no-such-target
inquire plan --profile small && inquire no-such-verb
```
`pipeline.show_fig(...)`, `pipeline.ablations.effects_table`, `pipeline.no_such_name`, `pipeline.plots.nowhere`
"""


def test_each_check_reports_a_bogus_name(tmp_path):
    """A copy of the README with BOGUS added: each check reports the bogus names it adds, and only them."""
    copy = tmp_path / "README.md"
    copy.write_text(_read("README.md") + BOGUS)

    def added(check):
        return sorted(set(check(copy.read_text())) - set(check(_read("README.md"))))

    assert added(missing_paths) == [
        "README.md#no-such-heading",
        "docs/lab/lost.md",
        "inquire_lib/no_such_package/",
        "tools/no_such_tool.py",
        "viz/no_such_module",
    ]
    assert added(missing_targets) == ["no-such-target"]
    assert added(missing_verbs) == ["no-such-verb"]
    assert added(missing_pipeline_names) == ["pipeline.no_such_name", "pipeline.plots.nowhere"]
