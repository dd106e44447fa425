"""requirements.txt is the one list of pins; environment.yml (conda, Binder) installs from it."""
import re

import yaml

from .conftest import ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)$")


def _requirements() -> dict[str, str]:
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    pins = {}
    for line in filter(None, lines):
        match = PIN.match(line)
        assert match, f"requirements.txt: {line!r} is not pinned as name==version"
        pins[match.group(1).lower()] = match.group(2)
    return pins


def test_environment_yml_installs_requirements_txt_and_pins_nothing_itself():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict) and "pip" in item)
    assert "-r requirements.txt" in pip
    assert [line for line in pip if "==" in line] == []  # a pin here would be a second list to keep in line
    conda = [item for item in environment["dependencies"] if isinstance(item, str)]
    assert set(conda) == {"python=3.11", "pip"}, conda


def test_torch_is_pinned_to_the_local_cpu_wheel():
    # any other torch requirement pulls a multi-GB CUDA build on the course machines
    assert _requirements()["torch"] == "2.13.0"
