"""A throw-away PostgreSQL server for the deployment tests: Debian's PostgreSQL 15, a cluster of its own.

Use it from a test module::

    from tests.deploy.postgres_cluster import postgres_server  # noqa: F401  (the fixture)

    def test_something(postgres_server):
        url = postgres_server.new_database("my_test")   # a fresh, empty database, owned by the test's role:
        ...                                              # postgresql+psycopg2://grader:PASSWORD@127.0.0.1:PORT/my_test
        postgres_server.restart()                        # fast shutdown (clients disconnected) and start again

``postgres_server`` is session-scoped (one server per pytest process, so one per xdist worker). What it yields:

- ``.url``: the URL of the database ``gradebook`` for the role ``grader`` (password authenticated, over TCP on
  127.0.0.1 at a free port), in the form the course reads from ``LMPOLICY_GRADEBOOK_URL``;
- ``.new_database(name, owner=None) -> url``: another empty database, owned by ``grader`` (or ``owner``, e.g.
  "postgres"), and the URL by which ``grader`` reaches it (tests that must not see each other's grades each take
  their own);
- ``.url_for(**parts) -> url``: the URL with some parts replaced (``password=``, ``database=``, ``port=``,
  ``host=``, ``user=``), for tests of wrong URLs;
- ``.stop()``, ``.start()``, ``.restart(mode="fast")`` (``mode`` as ``pg_ctl -m``: "smart", "fast",
  "immediate"); ``.running``;
- ``.host``, ``.port``, ``.user``, ``.password``, ``.database``, ``.data_dir``, ``.log_path``.

The server binaries refuse to run as root, and CI runs as root: then the cluster belongs to a system user,
``lmpolicy-pg``, made here if it does not exist, and every binary runs through ``runuser``. The cluster lives in a
folder of its own under the system's temporary folder (pytest's are private to root), with ``fsync`` off, and is
deleted at the end. Missing binaries skip the tests that use it, with the reason; with
``LMPOLICY_REQUIRE_DEPLOYMENT=1`` (CI) they fail instead. Outside pytest, ``with running_postgres() as server:``
gives the same object.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import cleanup

PG_BIN_PATTERN = "/usr/lib/postgresql/*/bin"
PREFERRED_BIN = Path("/usr/lib/postgresql/15/bin")
SYSTEM_USER = "lmpolicy-pg"
ROLE, DATABASE = "grader", "gradebook"


class PostgresUnavailable(RuntimeError):
    """This machine cannot run a PostgreSQL server for the tests; the message says why."""


def find_bin() -> Path:
    """The folder of PostgreSQL's server binaries (15 preferred, as CI installs it)."""
    if (PREFERRED_BIN / "initdb").exists():
        return PREFERRED_BIN
    found = sorted(Path(p) for p in glob.glob(PG_BIN_PATTERN) if (Path(p) / "initdb").exists())
    if not found:
        raise PostgresUnavailable(f"no PostgreSQL server binaries ({PREFERRED_BIN}/initdb): "
                                  "apt-get install postgresql (.ci/run does)")
    return found[-1]


def _server_user() -> str | None:
    """Whom the server runs as: None (this user) unless we are root, then the system user, made if missing."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                               SYSTEM_USER], capture_output=True, text=True)
        if made.returncode != 0 and "already exists" not in made.stderr:
            raise PostgresUnavailable(f"could not create the system user {SYSTEM_USER} for the server: "
                                      f"{made.stderr.strip()}")
    return SYSTEM_USER


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class PostgresServer:
    bin_dir: Path
    base: Path                    # the temporary folder holding the cluster, its socket and its log
    os_user: str | None           # the system user the binaries run as (None: the current one)
    port: int
    host: str = "127.0.0.1"
    user: str = ROLE
    database: str = DATABASE
    password: str = field(default_factory=lambda: secrets.token_hex(12))
    running: bool = False

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base / "socket"

    @property
    def log_path(self) -> Path:
        return self.base / "server.log"

    @property
    def url(self) -> str:
        return self.url_for()

    def url_for(self, *, user=None, password=None, host=None, port=None, database=None) -> str:
        return (f"postgresql+psycopg2://{user or self.user}:{self.password if password is None else password}"
                f"@{host or self.host}:{port or self.port}/{database or self.database}")

    # --- running the binaries -------------------------------------------------------------------

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bin_dir / program), *args]
        if self.os_user:
            command = ["runuser", "-u", self.os_user, "--", *command]
        done = subprocess.run(command, cwd=self.base, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            log = self.log_path.read_text()[-2000:] if self.log_path.exists() else ""
            raise PostgresUnavailable(f"{program} {' '.join(args)} failed ({done.returncode}): "
                                      f"{done.stderr.strip() or done.stdout.strip()}\n{log}")
        return done

    def init(self) -> None:
        self.data_dir.mkdir()
        self.socket_dir.mkdir()
        if self.os_user:
            for folder in (self.base, self.data_dir, self.socket_dir):
                shutil.chown(folder, self.os_user)
        self.data_dir.chmod(0o700)
        # local socket: trust (only the tests reach that folder); TCP: passwords (what the course's URL uses)
        self._run("initdb", "--pgdata", str(self.data_dir), "--username", "postgres", "--auth-local", "trust",
                  "--auth-host", "scram-sha-256", "--encoding", "UTF8", "--no-sync", "--no-instructions")

    def start(self) -> None:
        options = (f"-c listen_addresses={self.host} -c port={self.port} -c unix_socket_directories={self.socket_dir}"
                   " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        self._run("pg_ctl", "--pgdata", str(self.data_dir), "--log", str(self.log_path), "--options", options,
                  "--wait", "--timeout", "60", "start")
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "--pgdata", str(self.data_dir), "--mode", mode, "--wait", "--timeout", "60", "stop")
        self.running = False

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    # --- roles and databases --------------------------------------------------------------------

    def admin(self, sql: str, database: str = "postgres") -> None:
        """Run SQL as the superuser over the cluster's own socket (outside a transaction: CREATE DATABASE)."""
        import psycopg2
        connection = psycopg2.connect(host=str(self.socket_dir), port=self.port, user="postgres", dbname=database)
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(sql)
        finally:
            connection.close()

    def new_database(self, name: str, owner: str | None = None) -> str:
        """Make an empty database ``name`` owned by the role (or by ``owner``); returns the role's URL of it."""
        self.admin(f'CREATE DATABASE "{name}" OWNER "{owner or self.user}"')
        return self.url_for(database=name)

    def create_role_and_database(self) -> None:
        self.admin(f"CREATE ROLE \"{self.user}\" LOGIN PASSWORD '{self.password}'")
        self.new_database(self.database)


@contextlib.contextmanager
def running_postgres():
    """A fresh PostgreSQL cluster, started, with the role and its database; removed afterwards."""
    bin_dir = find_bin()
    os_user = _server_user()
    base = Path(tempfile.mkdtemp(prefix="lmpolicy-pg-"))
    undo = cleanup.register(f"the PostgreSQL cluster in {base}", lambda: _stop_at_once(base))
    server = None
    try:
        for attempt in range(3):  # another process may take the free port between the probe and the start
            server = PostgresServer(bin_dir, base, os_user, _free_port())
            if attempt == 0:
                server.init()
            try:
                server.start()
                break
            except PostgresUnavailable:
                if attempt == 2:
                    raise
        server.create_role_and_database()
        yield server
    finally:
        if server is not None and server.running:
            server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
        cleanup.done(undo)


def _stop_at_once(base: Path) -> None:
    """The cluster in ``base`` stopped without waiting (SIGQUIT: PostgreSQL's immediate shutdown) and removed;
    for a run that ends before its fixture's finalizer (tests/deploy/cleanup.py)."""
    pid_file = base / "data" / "postmaster.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
        except (ProcessLookupError, ValueError, IndexError):
            pass
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """A running PostgreSQL server for this pytest process (see the module's docstring)."""
    cleanup = contextlib.ExitStack()
    try:
        server = cleanup.enter_context(running_postgres())
    except PostgresUnavailable as error:
        if os.environ.get("LMPOLICY_REQUIRE_DEPLOYMENT"):
            pytest.fail(f"{error}; LMPOLICY_REQUIRE_DEPLOYMENT is set, so the PostgreSQL tests must run")
        pytest.skip(str(error))
    with cleanup:
        yield server
