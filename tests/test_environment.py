"""environment.yml (conda, Binder) and requirements.txt (pip) describe one environment."""
import re

from .conftest import ROOT

PIN = re.compile(r"^\s*(?:-\s+)?([A-Za-z0-9_.\-]+)==([^\s#]+)")


def _pins(lines):
    return {m.group(1).lower(): m.group(2) for m in map(PIN.match, lines) if m}


def test_environment_yml_and_requirements_pin_the_same_packages():
    requirements = _pins((ROOT / "requirements.txt").read_text().splitlines())
    environment = _pins((ROOT / "environment.yml").read_text().splitlines())
    assert requirements, "requirements.txt pins nothing"
    assert environment == requirements, (
        f"only in requirements.txt: {set(requirements.items()) - set(environment.items())}; "
        f"only in environment.yml: {set(environment.items()) - set(requirements.items())}"
    )


def test_torch_is_pinned_to_the_local_cpu_wheel():
    # any other torch requirement pulls a multi-GB CUDA build on the course machines
    assert _pins((ROOT / "requirements.txt").read_text().splitlines())["torch"] == "2.13.0"
