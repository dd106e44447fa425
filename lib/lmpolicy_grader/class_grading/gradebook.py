"""Where the grades live: nbgrader's gradebook, SQLite on one machine or PostgreSQL for a class of many graders.

nbgrader 0.9.6 opens a fresh ``Gradebook`` (its own SQLAlchemy engine) for every step of grading, and so do
formgrader and ``nbgrader`` on the command line. The course's configuration names the database once
(``c.CourseDirectory.db_url``, from ``LMPOLICY_GRADEBOOK_URL`` when that is set); this module

- reads that URL (``gradebook_url``) and refuses a configuration that quietly ignores ``LMPOLICY_GRADEBOOK_URL``
  (it names no URL, so nbgrader would fall back to its default SQLite file);
- checks it once before grading starts (``check_gradebook``): a malformed URL, an unknown dialect, a missing
  driver, a server that does not answer, a wrong password, a missing database or a role that may not create
  nbgrader's tables stop grading with ``GradebookUnavailable`` and a message that says what to fix, before any
  notebook is touched;
- prepares every grading worker process (``prepare_worker``). SQLite serialises writers badly (it gives up with
  "database is locked" after 5 s), so on SQLite each ``Gradebook`` session holds a file lock of the course. On
  PostgreSQL the server's transactions keep concurrent writers apart and no lock of the course's own is taken.
  Instead, every engine nbgrader makes there
  - opens a connection per transaction and closes it after (NullPool). No pooled connection is left to die in a
    server restart, and none idles: nbgrader's preprocessors never close their Gradebooks, and with the
    default pool each one kept a connection open until it was garbage, which exhausts the server in a long
    run. The price is one connection set-up per transaction, milliseconds on a local network;
  - waits for a restarting server, a bounded time, when it connects;
  - turns a connection lost in the middle of a transaction (which the server rolls back whole) into
    ``GradebookUnavailable`` naming the gradebook, so the notebook is reported FAILED for that reason.
"""
from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from pathlib import Path


LOCK_FILE = ".gradebook.lock"          # the SQLite session lock, at the course root
URL_VARIABLE = "LMPOLICY_GRADEBOOK_URL"
# How long a worker waits for the gradebook server to come back (a restart takes seconds); after that the
# notebook it was grading is reported FAILED, and a re-run grades it.
RECONNECT_SECONDS = float(os.environ.get("LMPOLICY_GRADEBOOK_RECONNECT_SECONDS", "60"))
CONNECT_TIMEOUT_SECONDS = 5           # one connection attempt; a black-holed host must not hang grading
URL_FORM = "postgresql+psycopg2://USER:PASSWORD@HOST:PORT/DATABASE"
_DEFAULT_DRIVER_NOTE = ("; a URL without +driver gets SQLAlchemy's default driver, for postgresql:// that is "
                        "psycopg (version 3) since SQLAlchemy 2.1, so name the driver")


class GradebookUnavailable(Exception):
    """The gradebook cannot be reached or used; the message says why and what to change."""


def gradebook_url(config, course_root: Path | str | None = None) -> str:
    """The gradebook URL the course's nbgrader uses: ``c.CourseDirectory.db_url`` of ``config`` (nbgrader's
    default, ``sqlite:///<root>/gradebook.db``, when the config sets none).

    Raises GradebookUnavailable when ``LMPOLICY_GRADEBOOK_URL`` is set but the config names no URL at all: that
    deployment meant a shared server, and nbgrader would grade into its default SQLite file without a word
    (a config that names a URL of its own, as the example submissions' course does with its private SQLite
    file, means it)."""
    from nbgrader.coursedir import CourseDirectory

    extra = {"root": str(course_root)} if course_root is not None else {}
    coursedir = CourseDirectory(config=config, **extra)
    wanted = os.environ.get(URL_VARIABLE, "").strip()
    if wanted and "db_url" not in config.get("CourseDirectory", {}):
        raise GradebookUnavailable(
            f"{URL_VARIABLE} is set to {_redact(wanted)}, but the nbgrader_config.py of {coursedir.root} sets no "
            f"c.CourseDirectory.db_url, so nbgrader would use its default SQLite file {_redact(coursedir.db_url)}; "
            f"add c.CourseDirectory.db_url = os.environ[{URL_VARIABLE!r}] to it (the course's own "
            f"nbgrader_config.py does), or unset {URL_VARIABLE}")
    return coursedir.db_url


def is_sqlite(url: str) -> bool:
    return url.split(":", 1)[0].split("+", 1)[0].strip().lower() == "sqlite"


def check_gradebook(url: str) -> None:
    """Connect to the gradebook at ``url`` once; raise GradebookUnavailable with the cause if that fails.

    A SQLite URL only needs its folder to exist (nbgrader creates the file and its tables)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
    from sqlalchemy.pool import NullPool

    try:
        parsed = _parse(url)
    except ArgumentError:
        raise GradebookUnavailable(
            f"the gradebook URL {_redact(url)} is not a database URL; it reads {URL_FORM} "
            f"(or sqlite:////path/to/gradebook.db on one machine)") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        folder = Path(parsed.database).parent if parsed.database not in (None, "", ":memory:") else None
        if folder is not None and not folder.is_dir():
            raise GradebookUnavailable(f"the SQLite gradebook {parsed.database} cannot be made: "
                                       f"its folder {folder} does not exist")
        return
    try:
        engine = create_engine(parsed, poolclass=NullPool, connect_args=_connect_args(parsed))
    except NoSuchModuleError:
        raise GradebookUnavailable(
            f"the gradebook URL {_redact(url)} names the database kind {parsed.drivername!r}, which SQLAlchemy does "
            f"not know; this course's gradebook is PostgreSQL ({URL_FORM}) or SQLite") from None
    except ImportError as error:
        raise GradebookUnavailable(
            f"the gradebook URL {_redact(url)} needs the database driver {parsed.get_driver_name()!r}, which is not "
            f"installed here ({error}); install it, or use postgresql+psycopg2:// (psycopg2-binary is in "
            f"requirements.txt){_DEFAULT_DRIVER_NOTE if '+' not in parsed.drivername else ''}") from None
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            if parsed.get_backend_name() == "postgresql":
                _check_can_create_tables(connection, parsed)
    except DBAPIError as error:
        raise GradebookUnavailable(_explain(parsed, error.orig)) from None
    finally:
        engine.dispose()


def _check_can_create_tables(connection, parsed) -> None:
    """nbgrader creates its tables on first use; since PostgreSQL 15 only a database's owner may create them
    in its schema ``public``, so a role that was merely granted access fails there, in the middle of grading."""
    from sqlalchemy import text
    tables_made, may_create = connection.execute(text(
        "SELECT to_regclass('grade') IS NOT NULL, has_schema_privilege(current_schema(), 'CREATE')")).one()
    if not tables_made and not may_create:
        user, database = parsed.username, parsed.database
        raise GradebookUnavailable(
            f"the role {user!r} may not create nbgrader's tables in the gradebook database {database!r} on "
            f"{_where(parsed)} (PostgreSQL 15 lets only the database's owner create them in schema public): "
            f"make it the owner (ALTER DATABASE {database} OWNER TO {user}) or GRANT CREATE ON SCHEMA public TO {user}")


def serialise_gradebook_sessions(lock_path: Path):
    """Make every nbgrader Gradebook in this process hold ``lock_path`` from creation to close().

    Returns a function that undoes it."""
    from nbgrader.api import Gradebook
    lock = _ProcessFileLock(lock_path)
    original_init, original_close = Gradebook.__init__, Gradebook.close

    # the locks a Gradebook holds, each released by the close() of the serialiser that took it: a process may
    # serialise on two courses' locks at once (each wrapping the other), and neither may release the other's
    def locked_init(self, *args, **kwargs):
        lock.acquire()
        held = self.__dict__.setdefault("_lmpolicy_locks", [])
        held.append(lock)
        try:
            original_init(self, *args, **kwargs)
        except BaseException:
            held.remove(lock)
            lock.release()
            raise

    def locked_close(self):
        try:
            original_close(self)
        finally:
            held = self.__dict__.get("_lmpolicy_locks", [])
            if lock in held:
                held.remove(lock)
                lock.release()

    Gradebook.__init__, Gradebook.close = locked_init, locked_close

    def undo():
        Gradebook.__init__, Gradebook.close = original_init, original_close
    return undo


class _ProcessFileLock:
    """An exclusive lock on a file, held by this process and re-entrant in it: a session opened inside another
    one does not wait for itself. The file is unlocked and closed when the last holder releases it."""

    def __init__(self, path: Path):
        self.path, self._fd, self._holders, self._guard = Path(path), None, 0, threading.RLock()

    def acquire(self) -> None:
        self._guard.acquire()   # a second thread waits here; the file lock keeps other processes out
        if self._holders == 0:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                self._guard.release()
                raise
            self._fd = fd
        self._holders += 1

    def release(self) -> None:
        self._holders -= 1
        if self._holders == 0:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._guard.release()


_prepared: dict[str, object] = {}   # what prepare_worker installed in this process: kind -> undo function


def prepare_worker(course_root: Path | str, config) -> None:
    """Set up this grading worker process for the course's gradebook (call once, before it grades).

    SQLite: every Gradebook session holds ``<course_root>/.gradebook.lock``. PostgreSQL (any server URL): no
    lock; nbgrader's engines reconnect instead (see the module's docstring). Calling it again does nothing:
    what it installs is per process, so a process that grades two SQLite courses serialises both on the lock
    of the first."""
    url = gradebook_url(config, course_root)
    kind = "sqlite" if is_sqlite(url) else "server"
    if kind in _prepared:
        return
    if kind == "sqlite":
        _prepared[kind] = serialise_gradebook_sessions(Path(course_root) / LOCK_FILE)
    else:
        _prepared[kind] = reconnecting_gradebooks()


def reconnecting_gradebooks(reconnect_seconds: float | None = None):
    """Make the engines nbgrader's Gradebook creates in this process survive a database server restart.

    Returns a function that undoes it."""
    import nbgrader.api
    import sqlalchemy

    original_create_engine = nbgrader.api.create_engine
    original_init = nbgrader.api.Gradebook.__init__

    def create_engine(url, **kwargs):
        parsed = _parse(url)
        if parsed.get_backend_name() == "sqlite":
            return original_create_engine(url, **kwargs)
        from sqlalchemy.pool import NullPool
        engine = original_create_engine(parsed, poolclass=NullPool, connect_args=_connect_args(parsed), **kwargs)
        _reconnect_on_connect(engine, parsed, RECONNECT_SECONDS if reconnect_seconds is None else reconnect_seconds)
        return engine

    def init_once_created(self, *args, **kwargs):
        # A Gradebook creates nbgrader's tables and its course row when they are missing; two workers doing that
        # at the same moment on an empty database make one of them fail with a duplicate. The database's
        # transaction undid the loser's attempt whole, so opening again finds what the winner made.
        for attempt in range(3):
            try:
                return original_init(self, *args, **kwargs)
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError, nbgrader.api.InvalidEntry):
                _close_quietly(self)
                if attempt == 2:
                    raise
                time.sleep(0.05 * (attempt + 1))

    nbgrader.api.create_engine = create_engine
    nbgrader.api.Gradebook.__init__ = init_once_created

    def undo():
        nbgrader.api.create_engine = original_create_engine
        nbgrader.api.Gradebook.__init__ = original_init
    return undo


# --- connecting --------------------------------------------------------------------------------

def _parse(url):
    from sqlalchemy.engine import make_url
    return make_url(url)


def _connect_args(parsed) -> dict:
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("psycopg2", "psycopg"):
        return {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    return {}


def _reconnect_on_connect(engine, parsed, reconnect_seconds: float) -> None:
    from sqlalchemy import event

    @event.listens_for(engine, "do_connect")
    def connect_waiting_for_the_server(dialect, connection_record, cargs, cparams):
        deadline = time.monotonic() + reconnect_seconds
        pause = 0.1
        while True:
            try:
                return dialect.loaded_dbapi.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError as error:
                if not _is_unreachable(error) or time.monotonic() + pause > deadline:
                    raise GradebookUnavailable(_explain(parsed, error, waited=reconnect_seconds)) from error
            time.sleep(pause)
            pause = min(2 * pause, 2.0)

    @event.listens_for(engine, "handle_error")
    def name_the_lost_gradebook(context):
        if context.is_disconnect:
            return GradebookUnavailable(
                f"the gradebook server {_where(parsed)} was unreachable: it closed the connection in the middle "
                f"of a transaction (restarted?), which it rolled back whole; grade this notebook again")
        return None


def _close_quietly(gradebook) -> None:
    try:
        gradebook.db.remove()
        gradebook.engine.dispose()
    except Exception:
        pass


# --- what went wrong, in words ------------------------------------------------------------------

_UNREACHABLE = ("connection refused", "could not connect", "could not translate host name", "timeout expired",
                "no route to host", "network is unreachable", "name or service not known", "server closed",
                "the database system is starting up", "the database system is shutting down",
                "the database system is in recovery mode", "terminating connection", "connection reset",
                "no such file or directory")


def _is_unreachable(error) -> bool:
    text = str(error).lower()
    return any(words in text for words in _UNREACHABLE)


def _where(parsed) -> str:
    host = parsed.host or "the local socket"
    return f"{host}:{parsed.port or 5432}/{parsed.database or ''}"


def _explain(parsed, error, waited: float | None = None) -> str:
    """An instructor's sentence for a failed connection to the gradebook server."""
    text = str(error).strip()
    lowered = text.lower()
    user = parsed.username or "(none)"
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        # PostgreSQL answers the same for a wrong password and a role it does not have (so as not to tell which)
        return (f"the gradebook server {_where(parsed)} refused the password of role {user!r} (a wrong password, "
                f"or no such role): correct the user and password in the gradebook URL ({URL_VARIABLE})")
    if re.search(r'role ".*" does not exist', lowered):
        return (f"the gradebook server {_where(parsed)} has no role {user!r}: create it (createuser --pwprompt "
                f"{user}) or correct the user in the gradebook URL ({URL_VARIABLE})")
    if re.search(r'database ".*" does not exist', lowered):
        return (f"the gradebook database {parsed.database!r} does not exist on the server {_where(parsed)}: "
                f"create it (createdb --owner {user} {parsed.database}) or correct the gradebook URL "
                f"({URL_VARIABLE})")
    first_line = text.splitlines()[0] if text else type(error).__name__
    if _is_unreachable(error) and waited:  # it answered before: it went away while we worked
        return (f"the gradebook server {_where(parsed)} was unreachable for {waited:.0f} s ({first_line}); "
                "nothing of this step was stored: grade again once the server is back")
    if _is_unreachable(error):
        return (f"the gradebook server {_where(parsed)} was unreachable ({first_line}): start it, or "
                f"correct the host and port in the gradebook URL ({URL_VARIABLE})")
    return f"the gradebook server {_where(parsed)} refused the connection: {first_line}"


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)
