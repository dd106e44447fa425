"""The hub harness leaves the machine as it found it: a run killed with SIGTERM stops its PostgreSQL server, its hub
and its users' servers, removes its accounts and their ACL entries; and it never touches another run's accounts,
only those of runs whose process is gone.

A child process plays the run (tests/deploy/hub.py and postgres_cluster.py, as a test module uses them): it makes a
site, starts PostgreSQL and the hub with one student's server, says what it started, and waits to be killed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .hub import (_ACL_USER, ACCOUNT_MARK, ROOT, RUN_TAG, _blocked_folders, _passwd, _process_start, _read_acl, _remove_user,
                  check_tools, python_paths)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

CHILD = f"""
import json, os, sys, time
sys.path.insert(0, {str(ROOT)!r})
from tests.deploy.hub import RUN_TAG, make_site, start_hub
from tests.deploy.postgres_cluster import running_postgres

site = make_site(students=(RUN_TAG + "-doomed",), instructor=RUN_TAG + "-doomedteacher")
postgres = running_postgres()
server = postgres.__enter__()
hub = start_hub(site, gradebook_url=server.new_database("doomed"), servers=(site.students[0],))
print(json.dumps({{"users": list(site.users), "uids": site.uids(), "root": str(site.root),
                  "postgres": str(server.base), "postmaster": int((server.data_dir / "postmaster.pid").read_text().split()[0]),
                  "hub": hub.process.pid, "server": hub.server_pid(site.students[0])}}), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _account(name: str, comment: str) -> None:
    subprocess.run(["useradd", "--no-create-home", "-s", "/usr/sbin/nologin", "-c", comment, name], check=True,
                   capture_output=True)


def test_a_run_killed_with_sigterm_leaves_nothing_and_another_runs_accounts_stay():
    check_tools()
    # another run, alive (this process), and a run that was killed long ago (no process has that pid and start)
    others, stale = f"{RUN_TAG}-otherrun", f"{RUN_TAG}-stalerun"
    _account(others, f"{ACCOUNT_MARK} pid {os.getpid()} {_process_start(os.getpid())}")
    _account(stale, f"{ACCOUNT_MARK} pid {os.getpid()} 1")
    folders = _blocked_folders(python_paths())
    before = {folder: (folder.stat().st_mode, _read_acl(folder)) for folder in folders}
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMPOLICY_")}
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
    try:
        line = child.stdout.readline()
        assert line, f"the run did not start:\n{child.stderr.read()[-4000:] if child.poll() is not None else ''}"
        started = json.loads(line)
        assert _passwd(others) is not None, "a run removed the account of another run that is still going"
        assert _passwd(stale) is None, "the account of a killed run was not removed"
        assert all(_alive(started[key]) for key in ("postmaster", "hub", "server"))
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=120) == -signal.SIGTERM  # the exit status still says what ended it
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        _remove_user(others)
        _remove_user(stale)

    deadline = time.monotonic() + 30
    while any(_alive(started[key]) for key in ("postmaster", "hub", "server")) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {key: started[key] for key in ("postmaster", "hub", "server") if _alive(started[key])}
    assert not left, f"still running after the run ended: {left}"
    assert not Path(started["postgres"]).exists() and not Path(started["root"]).exists()
    for user in started["users"]:
        assert _passwd(user) is None, f"the account {user} is left"
    for folder, (mode, acl) in before.items():
        named = {uid for tag, _, uid in _read_acl(folder) if tag == _ACL_USER}
        named_before = {uid for tag, _, uid in acl if tag == _ACL_USER}
        assert not named & set(started["uids"]), f"the run's ACL entries are left on {folder}"
        # no other run's entries, then or now (a run beside this one, on another test worker, adds and removes its
        # own, and the ACL mask shows in the group bits): the folder is exactly as it was, mode and all
        if not named and not named_before:
            assert folder.stat().st_mode == mode, f"{folder}: mode {oct(folder.stat().st_mode)}, was {oct(mode)}"
