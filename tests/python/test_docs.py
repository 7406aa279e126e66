"""The docs name only files that exist: every repository path that a tracked
markdown file mentions is in the tree. Needs no daemon.

What counts as a mention of a path (so that commands, flags, types and
placeholders are not taken for one):

- a link's target (`[text](ops.md)`), unless it is a URL or an anchor;
- a backticked span that is one word and either ends in one of
  SOURCE_SUFFIXES after a name (`runtime/buffer.h`, `limits.md`; `.hlo`
  alone is a suffix, not a file) or contains a "/" after a folder of the
  tree, a folder beside the markdown file, "..", or an include alias
  (`scripts/check-layering`, `host/kernel.h` in compiler/README.md; so
  `f32/f64` is not a path);
- any other word, in prose, commands in backticks or fenced code blocks,
  that starts with a top-level folder of the tree and a "/" (docs/ops.md,
  `source cli/pjrtctl.bash`, `kubectl apply -f deploy/kubernetes/x.yaml`).

`cluster.{h,cc}` stands for both files. A path with a "/" must exist inside
the repository, relative to its root or to the markdown file's folder (a
folder README names its own files so), or be an include name that stands
for a file of the tree (ALIASES, as scripts/check-layering reads them). A
file name alone (`backend.h`) must be the name of some file or folder of
the tree. Never checked: URLs, anchors, globs (`*`), `<version>` and
`...`, SKIPPED_PREFIXES (build outputs, paths on a target system) and
PLACEHOLDER_WORDS.
"""

from __future__ import annotations

import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Endings that make a backticked word a file name even without a "/".
SOURCE_SUFFIXES = (".h", ".cc", ".inc", ".cu", ".py", ".md", ".proto",
                   ".cmake", ".toml", ".json", ".yaml", ".hlo", ".mlir",
                   ".txt", ".in", ".bash", ".service", ".sysusers")

# Include names as the code writes them, which stand for files of the tree
# (generated protobuf headers, the installed client headers).
ALIASES = {
    "pjrt/v1/": "proto/pjrt/v1/",
    "grpc/health/v1": "proto/grpc/health/v1",
    "pjrt_client/": "client/cpp/pjrt_client/",
}

# Paths that are not in the tree by design.
SKIPPED_PREFIXES = (
    "build/", "build-", "./build/",  # build outputs (build/python/, ...)
    "/",                    # absolute, on a target system: /etc/pjrtd, ...
    "lib/", "etc/", "share/",  # under an install prefix: lib/pjrtd/, ...
    "~", "$",               # a home folder, a shell variable ($OUT/...)
)
# Placeholders in commands and paths (`pjrt-hlo run FILE.hlo --dump DIR`,
# `tests/fuzz/corpus/TARGET/`).
PLACEHOLDER_WORDS = {"FILE", "DIR", "TARGET"}

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
BRACES = re.compile(r"\{([^{}]*)\}")
PATH_WORD = re.compile(r"^[\w.+\-/{},]+$")


def tree_files(root: pathlib.Path) -> list[str]:
    """The files of the tree: tracked, and new ones git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True, text=True).stdout
    return sorted(set(out.splitlines()))


def markdown_files(root: pathlib.Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    return out.splitlines()


def expand_braces(word: str) -> list[str]:
    """`cluster.{h,cc}` -> [`cluster.h`, `cluster.cc`]."""
    m = BRACES.search(word)
    if not m:
        return [word]
    out = []
    for choice in m.group(1).split(","):
        out += expand_braces(word[:m.start()] + choice + word[m.end():])
    return out


def is_excluded(word: str) -> bool:
    """True for what names nothing of the tree though it may look so."""
    if "://" in word or word.startswith(("mailto:", "#")):
        return True                             # URLs, anchors
    if "*" in word or "<" in word or "..." in word:
        return True                             # globs, `<version>`
    if word.startswith(SKIPPED_PREFIXES):
        return True
    return any(part.split(".", 1)[0] in PLACEHOLDER_WORDS
               for part in word.split("/"))


def looks_like_path(word: str, folders: set[str]) -> bool:
    """Whether a backticked word names a path (see the module docstring)."""
    if not PATH_WORD.match(word) or is_excluded(word):
        return False
    if word.endswith(SOURCE_SUFFIXES):
        return not word.startswith(".") or word.startswith("../")
    if "/" not in word:
        return False
    first = word.split("/", 1)[0]
    return (first == ".." or first in folders
            or any(word.startswith(alias) for alias in ALIASES))


def bare_words(text: str, top_level: set[str]) -> list[tuple[int, str]]:
    """(offset, word) for each word of plain text under a top-level
    folder."""
    found = []
    for m in re.finditer(r"\S+", text):
        word = m.group(0).strip("`'\"()[],;:.!?*_")
        if "/" not in word or word.split("/", 1)[0] not in top_level:
            continue
        if PATH_WORD.match(word) and not is_excluded(word):
            found.append((m.start(), word))
    return found


def references(text: str, top_level: set[str],
               beside: set[str]) -> list[tuple[int, str]]:
    """(line, path) for every path that markdown `text` mentions; `beside`
    holds the folders beside the markdown file."""
    lines = text.splitlines()
    found: list[tuple[int, str]] = []
    prose = []                  # lines outside fenced code, by number
    fenced = False
    for n, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            found += [(n, w) for _, w in bare_words(line, top_level)]
        else:
            prose.append((n, line))
    # Code spans may wrap across lines: look for them in the joined prose.
    joined = "\n".join(line for _, line in prose)
    line_at = [n for n, line in prose for _ in range(len(line) + 1)] or [1]

    def at(offset: int) -> int:
        return line_at[min(offset, len(line_at) - 1)]

    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    for m in LINK.finditer(joined):
        if not is_excluded(m.group(1)) and m.group(1).split("#", 1)[0]:
            found.append((at(m.start()), m.group(1).split("#", 1)[0]))
    folders = top_level | beside
    for m in CODE_SPAN.finditer(joined):
        if looks_like_path(m.group(1).strip(), folders):
            found.append((at(m.start()), m.group(1).strip()))
    # Words of commands in backticks count as plain words (`source
    # cli/pjrtctl.bash`); a link's target was taken above.
    found += [(at(off), w)
              for off, w in bare_words(LINK.sub(blank, joined), top_level)]
    return sorted(set(found))


def exists(path: str, md_dir: pathlib.Path, root: pathlib.Path,
           names: set[str]) -> bool:
    """Whether `path`, mentioned in a markdown file of `md_dir`, exists
    inside the repository."""
    for one in expand_braces(path):
        if "/" not in one:
            if one in names or (md_dir / one).exists():
                continue
            return False
        candidates = [root / one, md_dir / one]
        candidates += [root / (target + one[len(alias):])
                       for alias, target in ALIASES.items()
                       if one.startswith(alias)]
        if not any(c.exists() and c.resolve().is_relative_to(root.resolve())
                   and (c.is_dir() or not one.endswith("/"))
                   for c in candidates):
            return False
    return True


def missing_paths(md_name: str, text: str, root: pathlib.Path,
                  files: list[str]) -> list[str]:
    """`md_name:line: path` for each path that `text` names and the tree
    (`files`, relative to `root`) lacks."""
    top_level = {f.split("/", 1)[0] for f in files if "/" in f}
    names = {part for f in files for part in f.split("/")}
    md_dir = (root / md_name).parent
    beside = {p.name for p in md_dir.iterdir() if p.is_dir()}
    return [f"{md_name}:{n}: {path}"
            for n, path in references(text, top_level, beside)
            if not exists(path, md_dir, root, names)]


def test_docs_name_only_files_of_the_tree() -> None:
    files = tree_files(ROOT)
    problems = []
    for md in markdown_files(ROOT):
        text = (ROOT / md).read_text(encoding="utf-8")
        problems += missing_paths(md, text, ROOT, files)
    assert not problems, (
        "the docs name paths that are not in the repository:\n  "
        + "\n  ".join(problems))


SYNTHETIC = """# A folder README

`present.h` and `sub/present.cc` are here, `runtime/buffer.{h,cc}` the
runtime's; see [limits](../docs/limits.md#top) and docs/limits.md.
`absent.h`, `sub/absent.cc`, [gone](../docs/gone.md), docs/gone.md,
`scripts/gone` and `runtime/buffer.{h,cc,inc}` are not. Never checked:
`build/bin/pjrtd`, `/etc/pjrtd/pjrtd.toml`, `lib/pjrtd/x.so`, `$OUT/log`,
`tests/data/*.hlo`, `pjrt-hlo run FILE.hlo`, `FILE.hlo`, `DIR/out0.npy`,
[site](https://example.com/a/b.md), [top](#top), `f32/f64`, and/or,
`--flag`, `.hlo`, `pjrtctl stats`.

```sh
cat sub/present.cc docs/limits.md docs/missing.md /var/cache/pjrtd
```
"""


def test_checker_reports_each_missing_path(tmp_path: pathlib.Path) -> None:
    files = ["folder/README.md", "folder/present.h", "folder/sub/present.cc",
             "runtime/buffer.h", "runtime/buffer.cc", "docs/limits.md",
             "scripts/check"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    problems = missing_paths("folder/README.md", SYNTHETIC, tmp_path, files)
    assert problems == [
        "folder/README.md:5: ../docs/gone.md",
        "folder/README.md:5: absent.h",
        "folder/README.md:5: docs/gone.md",
        "folder/README.md:5: sub/absent.cc",
        "folder/README.md:6: runtime/buffer.{h,cc,inc}",
        "folder/README.md:6: scripts/gone",
        "folder/README.md:13: docs/missing.md",
    ], problems


def test_checker_stays_inside_the_repository(tmp_path: pathlib.Path) -> None:
    (tmp_path / "outside.md").write_text("")
    (tmp_path / "repo" / "docs").mkdir(parents=True)
    problems = missing_paths("docs/a.md", "see `../outside.md` and "
                             "[it](../../outside.md)", tmp_path / "repo",
                             ["docs/a.md"])
    assert problems == ["docs/a.md:1: ../../outside.md",
                        "docs/a.md:1: ../outside.md"], problems


@pytest.mark.parametrize("word, expected", [
    ("daemon/cluster.{h,cc}", ["daemon/cluster.h", "daemon/cluster.cc"]),
    ("{a,b}/c.{h,cc}", ["a/c.h", "a/c.cc", "b/c.h", "b/c.cc"]),
    ("plain.h", ["plain.h"]),
])
def test_braces_stand_for_each_file(word: str, expected: list[str]) -> None:
    assert expand_braces(word) == expected
