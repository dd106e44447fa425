"""A real JupyterHub for the deployment tests: local accounts, a shared exchange, the hub, users' servers.

Everything lives in one temporary folder (mode 755, so the test accounts reach their homes and the
exchange): the accounts' homes (`useradd -m -b <tmp>/home`), the exchange, and the hub's state (its
SQLite database, cookie secret, logs). The hub is `jupyterhub -f deploy/jupyterhub_config.py`, the
file an admin copies, told its users, ports and folders through the environment variables it reads.
Nothing here touches /srv/nbgrader/exchange, /etc/jupyter or any other global configuration.

Needs root (CI runs as root), `useradd`/`userdel`/`runuser`, and configurable-http-proxy on PATH
(`make install` puts it in node_modules/.bin); without them the tests skip, or fail when
LMPOLICY_REQUIRE_DEPLOYMENT is set (CI sets it).

Two runs on one machine leave each other alone: a run's accounts are named with a tag of its own
(`lmp<4 hex>-student1`) and marked with the process that made them (their passwd comment); a run removes
only its own accounts, and those of runs whose process is gone (killed before it could clean up). The
folders above the course's Python that the accounts must pass through get an ACL entry per account,
removed at the end; their modes are never changed. The hub, the users' servers, the accounts and the
ACL entries are undone when the run ends, even by SIGTERM (tests/deploy/cleanup.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

import pytest

from . import cleanup
from .postgres_cluster import postgres_server  # noqa: F401  (the fixture `hub` uses)

ROOT = Path(__file__).resolve().parents[2]
HUB_CONFIG = ROOT / "deploy" / "jupyterhub_config.py"
VENV_BIN = Path(sys.executable).parent
# this run's accounts: a tag of its own, so that a run never takes another's names (at most 32 characters)
RUN_TAG = f"lmp{secrets.token_hex(2)}"
INSTRUCTOR = f"{RUN_TAG}-instructor"
STUDENTS = tuple(f"{RUN_TAG}-student{i}" for i in (1, 2, 3))
USERS = (INSTRUCTOR, *STUDENTS)
ACCOUNT_MARK = "lm-policy hub test"  # the passwd comment of every test account: "<mark> pid <pid> <start>"
COURSE_ID = "lm-policy"
ASSIGNMENT = "ch11"
COURSE_FOLDER = "lm-policy"  # in the instructor's home (LMPOLICY_COURSE_FOLDER)
# The hub's course holds one notebook of ch11 (a written answer and two autograded exercises): every
# notebook takes seconds to grade, and the hub's flow is the same for one as for eight.
HUB_NOTEBOOKS = ("01_policy_softmax",)
START_TIMEOUT = 120  # seconds, for the hub and for a user's JupyterLab on a busy 2-core machine


def require(condition: bool, message: str) -> None:
    """Skip the test when a tool is missing; fail instead when LMPOLICY_REQUIRE_DEPLOYMENT is set."""
    if condition:
        return
    if os.environ.get("LMPOLICY_REQUIRE_DEPLOYMENT"):
        pytest.fail(message + " (LMPOLICY_REQUIRE_DEPLOYMENT is set, so the deployment tests must run)")
    pytest.skip(message)


def check_tools() -> None:
    require(os.geteuid() == 0, "the hub tests create local accounts and run JupyterHub's LocalProcessSpawner: run as root")
    for tool in ("useradd", "userdel", "runuser", "getent"):
        require(shutil.which(tool) is not None, f"`{tool}` is not installed (package `passwd`/`util-linux`)")
    require(shutil.which("configurable-http-proxy") is not None,
            "configurable-http-proxy is not on PATH: `make install` (npm, package.json) puts it in node_modules/.bin")
    require((VENV_BIN / "jupyterhub").exists() and (VENV_BIN / "jupyterhub-singleuser").exists(),
            f"jupyterhub is not installed in {VENV_BIN} (requirements.txt)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_as(user: str, *command: str, env: dict | None = None, check: bool = False, timeout: float = 600,
           cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """``command`` as the local account ``user`` (runuser), with a clean environment of that account."""
    home = Path(_passwd(user)[5])
    base = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
            "PATH": f"{VENV_BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin"}
    full = ["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in {**base, **(env or {})}.items()),
            *command]
    result = subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=cwd or home)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} as {user} failed ({result.returncode}):\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def _passwd(user: str) -> list[str] | None:
    found = subprocess.run(["getent", "passwd", user], capture_output=True, text=True)
    return found.stdout.strip().split(":") if found.returncode == 0 else None


def _processes_of(user: str) -> list[int]:
    listed = subprocess.run(["ps", "-u", user, "-o", "pid="], capture_output=True, text=True)
    return [int(pid) for pid in listed.stdout.split()]


def _signal_all(user: str, signum: int) -> None:
    for pid in _processes_of(user):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is no such process: with the pid,
    it names one process for good (a pid alone may be taken again by another)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _this_run_mark() -> str:
    return f"{ACCOUNT_MARK} pid {os.getpid()} {_process_start(os.getpid())}"


def _stale_test_accounts() -> list[str]:
    """Test accounts whose run's process is gone (killed before it removed them)."""
    listed = subprocess.run(["getent", "passwd"], capture_output=True, text=True).stdout
    stale = []
    for line in listed.splitlines():
        fields = line.split(":")
        if len(fields) < 5 or not fields[4].startswith(ACCOUNT_MARK + " pid "):
            continue
        pid, _, started = fields[4][len(ACCOUNT_MARK + " pid "):].partition(" ")
        if not pid.isdigit() or _process_start(int(pid)) != started:
            stale.append(fields[0])
    return stale


def _remove_user(user: str) -> None:
    """Remove ``user`` and their home. First the processes our hub started as them (their JupyterLab and its
    kernels; userdel refuses while they run): SIGTERM, and SIGKILL to what is left after 10 s."""
    if _passwd(user) is None:
        return
    _signal_all(user, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _processes_of(user) and time.monotonic() < deadline:
        time.sleep(0.2)
    _signal_all(user, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _processes_of(user) and time.monotonic() < deadline:
        time.sleep(0.2)
    subprocess.run(["userdel", "-r", user], capture_output=True)
    if _passwd(user) is not None:
        raise RuntimeError(f"could not remove the test account {user}: `userdel -r {user}` as root")


def _blocked_folders(paths: list[Path]) -> list[Path]:
    """Folders on the way to ``paths`` that other accounts cannot pass (no o+x)."""
    blocked = set()
    for path in paths:
        for folder in [path, *path.parents] if path.is_dir() else list(path.parents):
            if not folder.stat().st_mode & stat.S_IXOTH:
                blocked.add(folder)
    return sorted(blocked)


# POSIX ACLs, as Linux keeps them in the xattr system.posix_acl_access: a version, then (tag, permissions, id)
_ACL_XATTR, _ACL_VERSION = "system.posix_acl_access", 2
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_ACL_NO_ID = 0xFFFFFFFF
_ACL_LOCK = Path("/run/lock/lmpolicy-hub-tests-acl.lock")  # runs side by side change one folder's ACL in turn


def _read_acl(folder: Path) -> list[tuple[int, int, int]]:
    """The folder's ACL entries; the ones its mode stands for when it has none."""
    try:
        raw = os.getxattr(folder, _ACL_XATTR)
    except OSError:
        mode = stat.S_IMODE(folder.stat().st_mode)
        return [(_ACL_USER_OBJ, mode >> 6 & 7, _ACL_NO_ID), (_ACL_GROUP_OBJ, mode >> 3 & 7, _ACL_NO_ID),
                (_ACL_OTHER, mode & 7, _ACL_NO_ID)]
    return [struct.unpack_from("<HHI", raw, offset) for offset in range(4, len(raw), 8)]


def _write_acl(folder: Path, entries: list[tuple[int, int, int]]) -> None:
    """Set the folder's ACL; without named users or groups, the plain mode again (no ACL left behind)."""
    named = [e for e in entries if e[0] in (_ACL_USER, _ACL_GROUP)]
    base = {tag: perm for tag, perm, _ in entries if tag not in (_ACL_USER, _ACL_GROUP, _ACL_MASK)}
    if not named:
        with contextlib.suppress(OSError):
            os.removexattr(folder, _ACL_XATTR)
        mode = stat.S_IMODE(folder.stat().st_mode) & ~0o777
        folder.chmod(mode | base[_ACL_USER_OBJ] << 6 | base[_ACL_GROUP_OBJ] << 3 | base[_ACL_OTHER])
        return
    mask = base[_ACL_GROUP_OBJ]
    for _, perm, _ in named:
        mask |= perm
    ordered = sorted([(tag, perm, ident) for tag, perm, ident in entries if tag != _ACL_MASK]
                     + [(_ACL_MASK, mask, _ACL_NO_ID)], key=lambda e: (e[0], e[2]))
    os.setxattr(folder, _ACL_XATTR, struct.pack("<I", _ACL_VERSION)
                + b"".join(struct.pack("<HHI", *entry) for entry in ordered))


@contextlib.contextmanager
def _acl_lock():
    _ACL_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(_ACL_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _uid_exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def let_pass(folders: list[Path], uids: list[int]) -> None:
    """Give each of ``uids`` the right to pass through (x, not list) ``folders``, by an ACL entry of its own;
    entries of accounts that no longer exist (a killed run's) are dropped on the way."""
    with _acl_lock():
        for folder in folders:
            entries = [e for e in _read_acl(folder) if e[0] != _ACL_USER or _uid_exists(e[2])]
            have = {e[2] for e in entries if e[0] == _ACL_USER}
            entries += [(_ACL_USER, 1, uid) for uid in uids if uid not in have]
            _write_acl(folder, entries)


def stop_letting_pass(folders: list[Path], uids: list[int]) -> None:
    """Remove the entries ``let_pass`` gave ``uids``; the folders are as they were once no run has any."""
    with _acl_lock():
        for folder in folders:
            with contextlib.suppress(FileNotFoundError):
                _write_acl(folder, [e for e in _read_acl(folder) if not (e[0] == _ACL_USER and e[2] in uids)])


@dataclass
class Site:
    """The machine's side of the course: accounts, homes, the exchange, the instructor's course folder."""

    root: Path
    exchange: Path
    instructor: str = INSTRUCTOR
    students: tuple[str, ...] = STUDENTS
    passwords: dict[str, str] = field(default_factory=dict)
    opened_folders: list[Path] = field(default_factory=list)  # the accounts' ACL entries (removed at the end)
    undo: int = -1  # its registration in tests/deploy/cleanup.py

    @property
    def users(self) -> tuple[str, ...]:
        return (self.instructor, *self.students)

    def home(self, user: str) -> Path:
        return Path(_passwd(user)[5])

    def uids(self) -> list[int]:
        return [int(_passwd(user)[2]) for user in self.users if _passwd(user)]

    @property
    def course(self) -> Path:
        return self.home(self.instructor) / COURSE_FOLDER


def make_site(students: tuple[str, ...] = STUDENTS, instructor: str = INSTRUCTOR) -> Site:
    """This run's accounts (marked as its own), homes, exchange, course folder; stale accounts of killed runs
    are removed first, nobody else's. Its undoing is registered at once (tests/deploy/cleanup.py)."""
    for user in _stale_test_accounts():
        _remove_user(user)
    root = Path(tempfile.mkdtemp(prefix="lmpolicy-hub-"))
    root.chmod(0o755)
    site = Site(root=root, exchange=root / "exchange", instructor=instructor, students=tuple(students))
    site.undo = cleanup.register(f"the hub test site {root} and its accounts", lambda: remove_site(site))
    homes = root / "home"
    homes.mkdir(mode=0o755)
    for user in site.users:
        if _passwd(user) is not None:
            raise RuntimeError(f"the account {user} exists already: another run's, or not a test account")
        subprocess.run(["useradd", "-m", "-b", str(homes), "-s", "/bin/bash", "-U", "-c", _this_run_mark(), user],
                       check=True, capture_output=True)
        # a home only its owner can enter: a student never reads another's work or the instructor's source
        (homes / user).chmod(0o700)
    site.opened_folders = _blocked_folders(python_paths())
    let_pass(site.opened_folders, site.uids())

    # The shared exchange as nbgrader documents it: a folder everyone may write into (`chmod ugo+rw`, and
    # x to enter it; nbgrader's release_assignment wants exactly 0777). nbgrader itself makes
    # <course>/outbound 755 (everyone reads the release), inbound 733 (everyone submits, nobody lists
    # the others' submissions) and feedback 711 (each fetches their own by its unguessable name).
    site.exchange.mkdir()
    site.exchange.chmod(0o777)

    # The instructor's course folder: the course's configuration and the hub's notebooks of ch11.
    course = homes / instructor / COURSE_FOLDER
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for notebook in HUB_NOTEBOOKS:
        shutil.copy2(ROOT / "source" / ASSIGNMENT / f"{notebook}.ipynb", course / "source" / ASSIGNMENT)
    subprocess.run(["chown", "-R", f"{instructor}:{instructor}", str(course)], check=True)

    site.passwords = {user: secrets.token_hex(8) for user in site.students}
    # SharedPasswordAuthenticator: 32 characters or more for admins
    site.passwords[instructor] = secrets.token_hex(20)
    return site


def remove_site(site: Site) -> None:
    """Stop every process of the site's accounts, remove the accounts, their ACL entries and the folder."""
    uids = site.uids()
    for user in site.users:
        _signal_all(user, signal.SIGTERM)  # every account's servers shut down side by side
    for user in site.users:
        _remove_user(user)
    stop_letting_pass(site.opened_folders, uids)
    shutil.rmtree(site.root, ignore_errors=True)
    cleanup.done(site.undo)


def python_paths() -> list[Path]:
    """What the accounts must reach: the repository (venv, lib/, deploy/) and the interpreter behind the venv.
    CI clones the repository somewhere unknown (under /root, mode 700, on these machines, whose Python also
    lives in /root/.pyenv)."""
    return [ROOT, Path(os.path.realpath(sys.executable)).parent, Path(sys.base_prefix)]


class HubError(AssertionError):
    pass


@dataclass
class Hub:
    """JupyterHub started with deploy/jupyterhub_config.py, on loopback ports of its own."""

    site: Site
    state: Path
    url: str = ""
    env: dict = field(default_factory=dict)
    process: subprocess.Popen | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    starts: int = 0
    undo: int = -1  # the running hub's registration in tests/deploy/cleanup.py

    @property
    def log_path(self) -> Path:
        return self.state / f"jupyterhub-{self.starts}.log"

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.state.glob("jupyterhub-*.log")))

    def configure(self, gradebook_url: str | None = None, settings: dict | None = None) -> None:
        """The hub's environment: its ports, folders, users; ``settings``, more LMPOLICY_HUB_* variables."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {key: value for key, value in os.environ.items() if not key.startswith(("JUPYTER", "LMPOLICY_"))}
        env.update({
            "PATH": f"{VENV_BIN}{os.pathsep}{ROOT / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "LMPOLICY_HUB_BIND_URL": self.url,
            "LMPOLICY_HUB_INTERNAL_URL": f"http://127.0.0.1:{free_port()}",
            "LMPOLICY_HUB_PROXY_API_URL": f"http://127.0.0.1:{free_port()}",
            "LMPOLICY_HUB_STATE_DIR": str(self.state),
            "LMPOLICY_HUB_INSTRUCTORS": self.site.instructor,
            "LMPOLICY_HUB_STUDENTS": ",".join(self.site.students),
            "LMPOLICY_HUB_TEST_PASSWORD": self.site.passwords[self.site.students[0]],
            "LMPOLICY_HUB_TEST_ADMIN_PASSWORD": self.site.passwords[self.site.instructor],
            "LMPOLICY_EXCHANGE": str(self.site.exchange),
            "LMPOLICY_COURSE_FOLDER": COURSE_FOLDER,
        })
        if gradebook_url:
            env["LMPOLICY_GRADEBOOK_URL"] = gradebook_url
        env.update(settings or {})
        self.env = env
        # every student logs in with the one shared student password
        for user in self.site.students:
            self.site.passwords[user] = env["LMPOLICY_HUB_TEST_PASSWORD"]

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [str(VENV_BIN / "jupyterhub"), "-f", str(HUB_CONFIG)], cwd=self.state, env=self.env,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        process = self.process
        self.undo = cleanup.register(f"the hub (process group {process.pid})", lambda: _kill_group(process))
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise HubError(f"jupyterhub exited with code {self.process.returncode}:\n{self.log()[-4000:]}")
            try:
                if self.request("GET", "/hub/api/")[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise HubError(f"the hub did not answer within {START_TIMEOUT} s:\n{self.log()[-4000:]}")
            time.sleep(0.3)

    def stop(self) -> None:
        """SIGTERM to the hub's process group (the hub and its proxy); the users' servers keep running."""
        if self.process is not None:
            _kill_group(self.process)
            cleanup.done(self.undo)

    # --- HTTP --------------------------------------------------------------------------------------
    def request(self, method: str, path: str, token: str | None = None, body=None,
                raw: bytes | None = None, timeout: float = 120) -> tuple[int, object, Message]:
        """``method path`` on the hub (JSON body in, JSON or text out): (status, body, headers); the
        headers' names are case-insensitive (the proxy sends them in lower case)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if token:
            headers["Authorization"] = f"token {token}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, text, got = response.status, response.read().decode("utf-8", "replace"), response.headers
        except urllib.error.HTTPError as error:
            status, text, got = error.code, error.read().decode("utf-8", "replace"), error.headers
        try:
            return status, json.loads(text) if text else None, got
        except json.JSONDecodeError:
            return status, text, got

    def login(self, user: str) -> str:
        """A token of ``user``'s own, asked of the hub with their password (the REST API's `auth` body)."""
        status, body, _ = self.request("POST", f"/hub/api/users/{user}/tokens", body={
            "auth": {"username": user, "password": self.site.passwords[user]}, "note": "deployment test"})
        if status != 201:
            raise HubError(f"{user} could not log in through the hub's API: {status} {body}")
        self.tokens[user] = body["token"]
        return body["token"]

    def user_api(self, user: str, method: str, path: str, body=None, raw: bytes | None = None,
                 timeout: float = 300) -> tuple[int, object, Message]:
        """``method /user/<user>/<path>`` through the hub's proxy, with the user's own token (``path`` is
        quoted here: nbgrader's feedback folders are named by a timestamp with spaces)."""
        where, _, query = path.lstrip("/").partition("?")
        path = urllib.parse.quote(where) + (f"?{query}" if query else "")
        return self.request(method, f"/user/{user}/{path}", token=self.tokens[user], body=body,
                            raw=raw, timeout=timeout)

    def server_ready(self, user: str) -> bool:
        status, model, _ = self.request("GET", f"/hub/api/users/{user}", token=self.tokens[user])
        assert status == 200, (status, model)
        server = (model.get("servers") or {}).get("")
        return bool(server and server.get("ready"))

    def start_server(self, user: str) -> None:
        """Spawn ``user``'s JupyterLab (as that account) and wait until it answers through the proxy."""
        status, body, _ = self.request("POST", f"/hub/api/users/{user}/server", token=self.tokens[user])
        if status not in (201, 202, 400):  # 400: already running
            raise HubError(f"the hub did not start {user}'s server: {status} {body}")
        deadline = time.monotonic() + START_TIMEOUT
        while not (self.server_ready(user) and self.user_api(user, "GET", "api/status")[0] == 200):
            if time.monotonic() > deadline:
                raise HubError(f"{user}'s server did not start within {START_TIMEOUT} s:\n{self.log()[-4000:]}")
            time.sleep(0.5)

    def stop_server(self, user: str) -> None:
        """Stop ``user``'s server through the hub (as the instructor, an admin) and wait until it is gone."""
        admin = self.tokens[self.site.instructor]
        self.request("DELETE", f"/hub/api/users/{user}/server", token=admin)
        deadline = time.monotonic() + 60
        while self.server_ready(user) or self.request("GET", f"/hub/api/users/{user}", token=admin)[1]["pending"]:
            if time.monotonic() > deadline:
                raise HubError(f"{user}'s server did not stop within 60 s")
            time.sleep(0.3)

    def server_pid(self, user: str) -> int:
        """The process id of ``user``'s server (jupyterhub-singleuser, or deploy/singleuser/start.py which runs
        it; the only one that account runs)."""
        # -ww: without it ps cuts the command line at 80 columns, and a long venv path loses the program's name
        listed = subprocess.run(["ps", "-ww", "-u", user, "-o", "pid=,args="], capture_output=True, text=True).stdout
        pids = [int(line.split()[0]) for line in listed.splitlines() if _is_user_server(line.split()[1:])]
        if len(pids) != 1:
            raise HubError(f"expected one jupyterhub-singleuser running as {user}, found {listed!r}")
        return pids[0]


def _is_user_server(command: list[str]) -> bool:
    return any(Path(part).name in ("jupyterhub-singleuser", "start.py") for part in command[:2])


def _kill_group(process: subprocess.Popen) -> None:
    """SIGTERM to ``process``'s group, SIGKILL after 30 s; its own process reaped."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def start_hub(site: Site, gradebook_url: str | None = None, settings: dict | None = None,
              servers: tuple[str, ...] | None = None) -> Hub:
    """The hub, every user logged in (a token each), and the servers of ``servers`` (all users' when None)
    started at once."""
    state = site.root / "hub"
    state.mkdir(mode=0o700)
    hub = Hub(site=site, state=state)
    hub.configure(gradebook_url, settings)
    hub.start()
    try:
        for user in site.users:
            hub.login(user)
        servers = site.users if servers is None else servers
        for user in servers:
            hub.request("POST", f"/hub/api/users/{user}/server", token=hub.tokens[user])  # spawn all at once
        for user in servers:
            hub.start_server(user)
    except BaseException:
        hub.stop()
        raise
    return hub


def stop_hub(hub: Hub) -> None:
    """Stop the hub; the users' servers (cleanup_servers is off) go with their accounts (remove_site)."""
    hub.stop()


@pytest.fixture(scope="module")
def site():
    """This run's accounts, homes, exchange and course folder; the course's Python reachable by the accounts."""
    check_tools()
    made = make_site()
    try:
        yield made
    finally:
        remove_site(made)


@pytest.fixture(scope="module")
def hub(site, postgres_server):
    """The hub with every user's server started, the gradebook in PostgreSQL (a database of the tests'
    throw-away server, tests/deploy/postgres_cluster.py); stopped with the servers at the end of the module."""
    started = None
    try:
        started = start_hub(site, gradebook_url=postgres_server.new_database("hub_gradebook"))
        yield started
    finally:
        if started is not None:
            stop_hub(started)
