"""docs/threat_model.md proves each claim with a test: every test it cites exists under tests/."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_the_threat_model_cites_exists():
    page = (ROOT / "docs" / "threat_model.md").read_text()
    cited = set(re.findall(r"`(test_[A-Za-z0-9_]+)", page))
    files = {path.stem for path in (ROOT / "tests").rglob("test_*.py")}
    defined = set()
    for path in (ROOT / "tests").rglob("*.py"):
        defined |= set(re.findall(r"^(?:async )?def (test_[A-Za-z0-9_]+)", path.read_text(), re.MULTILINE))
    # a cited name may be a test, a file of tests, or a test's name cut short with "..." (a prefix)
    missing = sorted(name for name in cited if name not in defined and name not in files
                     and not any(test.startswith(name.rstrip("_")) for test in defined))
    assert len(cited) > 50
    assert not missing, f"docs/threat_model.md cites tests that do not exist: {missing}"
