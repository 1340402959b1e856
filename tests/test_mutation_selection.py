"""`make mutation` runs every unit-test file of each module it mutates (pyproject's [tool.mutmut])."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_file_named_after_a_mutated_module_is_in_mutmuts_selection():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    selected = set(config["pytest_add_cli_args_test_selection"])
    named = {
        str(test.relative_to(ROOT))
        for module in config["only_mutate"]
        for test in (ROOT / "tests" / Path(module).parent).glob(f"test_{Path(module).stem}*.py")
    }
    assert named and named <= selected, sorted(named - selected)
    assert all((ROOT / path).is_file() for path in selected)
