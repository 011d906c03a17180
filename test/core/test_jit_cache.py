"""The compiled-code cache key follows a module's wmr_model imports, transitively."""

import pytest

from wmr_model import _jit as J


@pytest.fixture
def fake_pkg(tmp_path, monkeypatch):
    pkg = tmp_path / "wmr_model"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "kernels.py").write_text("from wmr_model.base import thing\n")
    (pkg / "base.py").write_text("thing = 1\n")
    (pkg / "loops.py").write_text(
        "import numpy as np\n"
        "from wmr_model import kernels as K\n"
        "from wmr_model.sub import (\n    deep,\n)\n"
        "from wmr_model.other import x\n")
    (pkg / "sub" / "deep.py").write_text("y = 2\n")
    (pkg / "other.py").write_text("x = 3\n")
    (pkg / "unrelated.py").write_text("z = 4\n")
    monkeypatch.setattr(J, "_PKG", pkg)
    J._closure_hash.cache_clear()
    yield pkg
    J._closure_hash.cache_clear()


def _key(pkg):
    J._closure_hash.cache_clear()
    return J._closure_hash(pkg / "loops.py")


def test_imports_found_across_consecutive_and_parenthesized_lines(fake_pkg):
    names = {p.name for p in J._imports(fake_pkg / "loops.py")}
    assert names == {"__init__.py", "kernels.py", "deep.py", "other.py"}


@pytest.mark.parametrize(("edited", "changes"), [
    ("base.py", True),        # imported through kernels.py (transitive)
    ("sub/deep.py", True),    # parenthesized import list
    ("other.py", True),       # the line right after another import
    ("unrelated.py", False),  # not imported: compiled code stays valid
])
def test_key_changes_exactly_with_the_closure(fake_pkg, edited, changes):
    before = _key(fake_pkg)
    f = fake_pkg / edited
    f.write_text(f.read_text() + "# edit\n")
    assert (_key(fake_pkg) != before) is changes
