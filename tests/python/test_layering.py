"""scripts/check-layering: the tree follows the layer table of
docs/architecture.md, and an include that a row does not allow fails the
check, naming the file, the line, the include and the row."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check-layering"

TABLE = """# architecture

## Layers

| folder | what | may include |
|---|---|---|
| `base/` | helpers | abseil |
| `hlo/` | programs | `base/` |
| `compiler/` | interface | `hlo/`, `base/` |
| `compiler/host/` | a backend | `compiler/backend.h`, `hlo/`, `base/` |
| `runtime/` | the runtime | `compiler/backend.h`, `base/` |
| `cli/` | tools | `proto/` |
| `cli/offline.cc` | a tool on the runtime | `runtime/` |
| `tests/` | tests | all |

## Next section
"""


def run_check(root: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


def make_tree(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(TABLE)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


GOOD = {
    "base/status.h": '#include "absl/status/status.h"\n',
    "hlo/shape.h": '#include "base/status.h"\n#include <vector>\n',
    "compiler/backend.h": '#include "hlo/shape.h"\n',
    "compiler/backend.cc": '#include "compiler/host/compiler.h"\n',
    "compiler/host/compiler.h": '#include "compiler/backend.h"\n'
                                '#include "compiler/host/kernel.h"\n',
    "runtime/client.cc": '#include "compiler/backend.h"\n'
                         '#include "client_impl.h"\n',
    "cli/tool.cc": '#include "pjrt/v1/types.pb.h"\n',
    "cli/offline.cc": '#include "runtime/client.h"\n#include "cli/npy.h"\n',
    "tests/any_test.cc": '#include "compiler/host/compiler.h"\n',
}


def test_the_tree_follows_the_layer_table():
    result = run_check(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "files follow the layer table" in result.stdout


def test_allowed_includes_pass(tmp_path):
    result = run_check(make_tree(tmp_path, GOOD))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "9 files follow" in result.stdout


@pytest.mark.parametrize("path,include,row", [
    # A layer above.
    ("hlo/parser.cc", "runtime/client.h", "hlo/"),
    # A backend's own header from the runtime: only the interface.
    ("runtime/execute.cc", "compiler/host/compiler.h", "runtime/"),
    # A subfolder's row narrows its folder's: the host backend may not
    # include compiler/ files beyond those named.
    ("compiler/host/fusion.cc", "compiler/disk_cache.h", "compiler/host/"),
    # A file's row applies to that file alone.
    ("cli/tool.cc", "runtime/client.h", "cli/"),
    # Generated headers count as their folder (proto/).
    ("hlo/ir.h", "pjrt/v1/types.pb.h", "hlo/"),
])
def test_an_include_the_table_forbids_fails(tmp_path, path, include, row):
    files = dict(GOOD)
    files[path] = f'#include <string>\n\n#include "{include}"\n'
    result = run_check(make_tree(tmp_path, files))
    assert result.returncode == 1, result.stdout + result.stderr
    assert (f'{path}:3: includes "{include}", which its row `{row}` does '
            f"not allow") in result.stdout
    assert "1 includes break the layer table" in result.stderr


def test_a_file_no_row_covers_fails(tmp_path):
    files = dict(GOOD)
    files["tools/gen.cc"] = "int main() {}\n"
    result = run_check(make_tree(tmp_path, files))
    assert result.returncode == 1
    assert "tools/gen.cc: no row of the layer table covers it" in result.stdout


def test_a_missing_table_is_an_error(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text("# nothing here\n")
    result = run_check(tmp_path)
    assert result.returncode == 2
    assert "has no '## Layers' section" in result.stderr
