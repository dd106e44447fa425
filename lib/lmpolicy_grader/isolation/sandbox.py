"""The grading kernel's sandbox: bubblewrap (``bwrap``) namespaces around the limited kernel.

A submission's code runs with nothing of the course in view. The sandbox has its own mount, pid,
network, IPC and UTS namespaces and sees only:

- the system (``/usr``, ``/etc`` and the merged-usr links), the Python installation and the folders
  the course's packages are imported from (``lmpolicy``, ``lmpolicy_grader``), all read-only; never
  a folder that holds the notebook's own folder (the course root, the instructor's home);
- its working folder, ``WORK_FOLDER`` (the same for every notebook, so it tells nothing of where
  the course lives): a fresh tmpfs of bounded size, into which the notebook folder's other files
  (not its notebooks, which after sanitizing hold hidden tests) are copied, so it may write there
  and nothing goes back. They are copied at start, or, for a kernel started before its notebook
  was known (``kernel_pool``), staged later (``stage``) and copied by the kernel before any cell;
- ``/tmp``, a second tmpfs of bounded size, which is also its ``$HOME``;
- one private folder for the kernel's connection file and ZMQ sockets (``transport="ipc"``: the
  network namespace has its own loopback, so TCP to the grader cannot work and nothing else can
  either). It is on the host's disk: once the kernel has bound its sockets it is closed to it (``seal``).

The student library ``lmpolicy`` is not the real one: the kernel sees a view of it (``library_view``),
a copy in the private folder mounted over the real package folder, in which the functions that answer
the graded notebook's exercises raise "not available while grading". The real source, its bytecode and
its folder are not in the sandbox at any path.

Of the grader's package, what no grading kernel imports and a submission must not read is covered up
(``GRADER_DATA``: the typical wrong answers and the example written answers, which quote the solutions line
for line, and the hidden tests, which only the trusted kernel runs). The
sandbox's own root and ``/dev`` are remounted read-only once everything is in place: a kernel that
runs as the grader's uid (a grader that is not root) would otherwise own them, and they are tmpfs
without a size bound, so it could fill half the host's memory there.

Every process of the sandbox holds only the descriptors it was given: standard input ``/dev/null``, standard
output and error a pipe the grader drains into a bounded tail (``kernels.drained_pipe``), never a file of the host,
which a kernel could reach in any process beside it through ``/proc/<pid>/fd`` (they share a pid namespace, and
the holder runs as the kernel's own uid). ``prlimit --fsize`` bounds every file it writes anywhere (``file_bytes``,
by default the scratch bound: a write past it fails with ``EFBIG``, "File too large", which Python's own start
and the forked kernel's turn from a signal into that error), and ``prlimit --core=0`` keeps it from leaving a core
dump, which a host's pipe ``core_pattern`` would write on the host's disk.

Processes are capped with ``prlimit --nproc``. RLIMIT_NPROC is never enforced for global root, so a
grader running as root starts the kernel as an unused uid of its own (``setpriv``); a grader running
as a normal user gets a user namespace, where the limit counts only the sandbox's processes. Memory
and CPU time keep the grading kernel's ``prlimit --as --cpu``, per process; where the grader may make
control groups (as root), the whole sandbox's memory, processes and CPU are capped together too
(``cgroup``). Everything the sandbox holds lives in
tmpfs or in a host folder removed after the kernel stops: nothing persists from one notebook to the
next.
"""
from __future__ import annotations

import asyncio
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from lmpolicy_grader.isolation import library_view
from lmpolicy_grader.isolation.cgroup import SandboxCgroup
from lmpolicy_grader.isolation.entering import remount_read_only

# Enough for a kernel's threads (torch, ZMQ, IPython) with a wide margin; a fork bomb stops here.
DEFAULT_MAX_PROCESSES = 256
# /tmp and the working folder each: no ch11 notebook writes more than a few kilobytes.
DEFAULT_SCRATCH_BYTES = 256 * 1024**2
# The rlimits every process of the sandbox gets, by resource.RLIMIT_<name> (prlimit --<name in lower case>).
SANDBOX_LIMITS = ("NPROC", "FSIZE", "CORE")

# Environment variables the kernel gets; everything else (tokens, the instructor's paths) stays out.
_PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONHASHSEED", "MPLBACKEND")
_PASSED_ENV_PREFIXES = ("NBGRADER_",)
_PASSED_ENV_SUFFIXES = ("_NUM_THREADS",)
# Where, inside the sandbox, the notebook folder's files wait to be copied into the working folder.
STAGED_FILES = "/run/lmpolicy-notebook-files"
# The kernel's working folder inside the sandbox, whatever the notebook.
WORK_FOLDER = "/home/student/notebook"
# Run in the working folder, in the sandbox: takes the staged files.
COPY_STAGED_FILES = ("cp", "-R", "--", f"{STAGED_FILES}/.", ".")
# Files and folders of lmpolicy_grader that no grading kernel imports and a submission must not read: the
# corpus quotes the solutions (a wrong answer is the solution with one mistake, a good written answer is a model
# answer), and the hidden tests are the hidden part of every test cell (the trusted kernel, unsandboxed, runs them).
GRADER_DATA = ("corpus", "hidden_tests")

ENABLE_HELP = (
    "The grading kernel runs in a bubblewrap sandbox so that a submission cannot read the course's "
    "solutions, the gradebook or other students' work. To enable it: install bubblewrap "
    "(Debian/Ubuntu: `apt-get install bubblewrap`) and allow user namespaces "
    "(`sysctl -w user.max_user_namespaces=15000`; on Ubuntu 24.04 also "
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for bwrap; "
    "in a container, run it with --privileged or a seccomp profile that allows unshare/clone). "
    "Only if you trust every submission, grade without it: `python -m lmpolicy_grader grade --sandbox off` "
    "or `c.GradingKernelManager.sandbox = False` in nbgrader_config.py."
)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be made here; the message says why and how to enable it."""


@lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why no sandbox can be made on this machine (None if a trial sandbox runs)."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces, and this is {sys.platform}"
    for tool in ("bwrap", "prlimit") + (("setpriv",) if os.geteuid() == 0 else ()):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH"
    with tempfile.TemporaryDirectory(prefix="lmpolicy-sandbox-trial-") as folder:
        return _trial_problem(Path(folder))


def _trial_problem(folder: Path) -> str | None:
    trial = Sandbox.create(folder, max_processes=16, scratch_bytes=1024**2)
    try:
        command = trial.command(["/bin/sh", "-c", "echo ok > ok && cat ok"], {})
        try:
            ran = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"a trial sandbox did not run: {error}"
        if ran.returncode != 0 or ran.stdout.strip() != "ok":
            said = (ran.stderr.strip() or ran.stdout.strip() or "no message").splitlines()[-1]
            return f"a trial sandbox failed (exit code {ran.returncode}): {said}"
    finally:
        trial.remove()
    return None


def require_sandbox() -> None:
    """Raise SandboxUnavailable (why, and how to enable it) unless the sandbox works here."""
    problem = sandbox_problem()
    if problem is not None:
        raise SandboxUnavailable(f"cannot grade in a sandbox: {problem}. {ENABLE_HELP}")


_uid_counter = itertools.count()


def private_uid_base(pid: int) -> int:
    """The first of the 64 uids the sandboxes started by process ``pid`` use, in turn."""
    return 1_000_000_000 + pid * 64


def _private_uid() -> int:
    """A uid no account and no other running sandbox uses: RLIMIT_NPROC is counted per uid, so each
    kernel needs its own, or a fork bomb in one kernel would starve the kernels beside it."""
    return private_uid_base(os.getpid()) + next(_uid_counter) % 64


def _contains(folder: Path, path: Path) -> bool:
    return path == folder or folder in path.parents


def _package_folders() -> list[str]:
    """The folders lmpolicy and lmpolicy_grader are imported from in the grader."""
    import lmpolicy
    import lmpolicy_grader
    return sorted({str(Path(package.__file__).resolve().parents[1]) for package in (lmpolicy, lmpolicy_grader)})


def covered_grader_data() -> list[Path]:
    """The paths of GRADER_DATA in the grader's package, with their bytecode: the sandbox covers them up."""
    import lmpolicy_grader
    package = Path(lmpolicy_grader.__file__).resolve().parent
    paths = [package / name for name in GRADER_DATA]
    paths += [cached for name in GRADER_DATA for cached in (package / "__pycache__").glob(f"{Path(name).stem}.*.pyc")]
    return sorted(path for path in paths if path.exists())


def readable_folders(notebook_dir: Path | None = None) -> list[Path]:
    """The Python installation and the course packages' import folders, minus any folder that holds
    ``notebook_dir`` (binding that would show the course root: source/, the gradebook, everyone's work;
    ``Sandbox.shows`` tells whether a sandbox made without a notebook folder would show one)."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  Path(sys.executable).parent, os.path.realpath(sys.executable) + "/../..", *_package_folders()]
    candidates += [entry for entry in sys.path if entry.endswith(("site-packages", "dist-packages"))]
    folders: list[Path] = []
    for candidate in candidates:
        folder = Path(os.path.realpath(candidate))
        if not folder.is_dir() or folder == Path("/") or (notebook_dir and _contains(folder, notebook_dir.resolve())):
            continue
        if not any(_contains(known, folder) for known in folders):
            folders = [known for known in folders if not _contains(folder, known)] + [folder]
    return sorted(folders)


@dataclass
class Sandbox:
    """One kernel's sandbox: its host-side private folder and the bwrap command line around it."""

    notebook_dir: Path | None          # the notebook's folder on the host (None: not known yet)
    private: Path                      # host folder: sockets/ (bound in) and files/ (copied in)
    max_processes: int = DEFAULT_MAX_PROCESSES
    scratch_bytes: int = DEFAULT_SCRATCH_BYTES
    uid: int | None = None             # the kernel's uid when the grader runs as root
    readable: list[Path] = field(default_factory=list)
    cgroup: SandboxCgroup | None = None  # the whole sandbox's memory, processes and CPU (cgroup.py)
    file_bytes: int | None = None      # the largest file any of its processes may write (None: scratch_bytes)

    @classmethod
    def create(cls, notebook_dir: Path | None, max_processes: int = DEFAULT_MAX_PROCESSES,
               scratch_bytes: int = DEFAULT_SCRATCH_BYTES, group_limits: dict | None = None,
               library: Path | None = None, file_bytes: int | None = None) -> "Sandbox":
        """The sandbox of a kernel for ``notebook_dir`` (its files copied in at start), or for a
        notebook not known yet (None: ``stage`` its files once it is). ``library``: the view of
        lmpolicy the kernel sees (``library_view.view``; None: no lmpolicy at all). ``group_limits``
        (``memory_bytes``, ``cpu_cores``): put the whole sandbox in a control group with these limits
        and ``max_processes`` (raises CgroupUnavailable where none can be made). ``file_bytes``: the largest
        file its processes may write (None: ``scratch_bytes``)."""
        notebook_dir = Path(notebook_dir).resolve() if notebook_dir is not None else None
        private = Path(tempfile.mkdtemp(prefix="lmpolicy-sandbox-"))
        uid = _private_uid() if os.geteuid() == 0 else None
        sandbox = cls(notebook_dir, private, max_processes, scratch_bytes, uid, readable_folders(notebook_dir),
                      file_bytes=file_bytes)
        if group_limits is not None:
            try:
                sandbox.cgroup = SandboxCgroup.create(private.name, max_processes=max_processes, **group_limits)
            except BaseException:
                sandbox.remove()
                raise
        sandbox.sockets.mkdir()
        sandbox.show_library(library)
        sandbox.staged.mkdir(mode=0o755)
        sandbox.staged.chmod(0o755)  # readable by the kernel's uid, whatever the umask
        if notebook_dir is not None:
            sandbox._stage_files(notebook_dir)
        (sandbox.empty / "folder").mkdir(parents=True)
        (sandbox.empty / "file").touch()
        for path in [sandbox.empty, sandbox.empty / "folder", sandbox.empty / "file"]:  # readable by the kernel's uid
            path.chmod(0o755 if path.is_dir() else 0o644)
        if uid is not None:  # the kernel binds its ZMQ sockets here; seal() takes the folder back
            os.chown(sandbox.sockets, uid, uid)
        return sandbox

    @property
    def sockets(self) -> Path:
        """Host folder for the connection file and the ZMQ ipc sockets, bound in at the same path."""
        return self.private / "sockets"

    @property
    def staged(self) -> Path:
        return self.private / "files"

    @property
    def library(self) -> Path:
        """Host folder mounted over the real lmpolicy package: the view the kernel imports."""
        return self.private / "library"

    def show_library(self, view: Path | None) -> None:
        """Make the kernel's lmpolicy ``view`` (None: an empty folder); for a kernel started before its
        notebook was known, called again with that notebook's view before any of its cells runs."""
        if view is None:
            self.library.mkdir(mode=0o755, exist_ok=True)
            self.library.chmod(0o755)
        else:
            library_view.install(view, self.library)

    @property
    def empty(self) -> Path:
        """Host folder with an empty ``folder`` and an empty ``file``, bound read-only over the grader's data."""
        return self.private / "empty"

    def _covered(self) -> list[Path]:
        """The grader's data inside the folders bound in, to be covered up."""
        return [path for path in covered_grader_data() if any(_contains(folder, path) for folder in self.readable)]

    def let_read(self, path: Path) -> None:
        """Let the kernel's uid read ``path`` (the private folder above it is closed to everyone else)."""
        if self.uid is not None:
            os.chmod(path, 0o644)

    async def seal(self, socket_files: list[str], bwrap_pid: int, timeout: float = 120) -> None:
        """Once the kernel has bound its sockets, close the sockets folder to it: it is on the host's disk, and a
        kernel that could still write there could fill it. The kernel of a grader that is not root runs as the
        grader's own uid, which owns the folder: there the folder is made read-only inside the sandbox that
        ``bwrap_pid`` made (its sockets still answer; the grader, outside, sees the folder as before). A grader
        that is root takes the folder back from the kernel's uid."""
        deadline = time.monotonic() + timeout
        while not all(os.path.exists(path) for path in socket_files) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self.uid is None:
            await asyncio.to_thread(remount_read_only, bwrap_pid, str(self.sockets))
            return
        os.chown(self.sockets, 0, 0)
        os.chmod(self.sockets, 0o755)

    def shows(self, notebook_dir: Path) -> bool:
        """Would this sandbox show ``notebook_dir`` (one of its read-only folders holds it)?"""
        return any(_contains(folder, Path(notebook_dir).resolve()) for folder in self.readable)

    def stage(self, notebook_dir: Path) -> bool:
        """For a sandbox made before its notebook was known: put ``notebook_dir``'s files where the
        kernel can copy them from (``STAGED_FILES``); False if there are none."""
        if self.notebook_dir is not None or self.shows(notebook_dir):
            raise ValueError(f"this sandbox cannot take {notebook_dir}: it was made for {self.notebook_dir} "
                             "or would show that folder")
        self.notebook_dir = Path(notebook_dir).resolve()
        self._stage_files(self.notebook_dir)
        return self._has_staged_files()

    def _stage_files(self, notebook_dir: Path) -> None:
        # The notebook folder's own files, minus notebooks and hidden files: a sanitized .ipynb holds
        # hidden tests, of this notebook and of the student's others.
        def skipped(_folder, names):
            return [name for name in names if name.endswith(".ipynb") or name.startswith(".")]
        if notebook_dir.is_dir():
            shutil.copytree(notebook_dir, self.staged, ignore=skipped, symlinks=True, dirs_exist_ok=True)
            for path in [self.staged, *self.staged.rglob("*")]:  # readable by the kernel's uid
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))

    def _has_staged_files(self) -> bool:
        return self.staged.is_dir() and any(self.staged.iterdir())

    def limits(self) -> dict[str, int]:
        """The rlimits of every process in the sandbox (``SANDBOX_LIMITS``): processes, the size of any file it
        writes, and no core dump."""
        file_bytes = self.scratch_bytes if self.file_bytes is None else self.file_bytes
        return dict(zip(SANDBOX_LIMITS, (self.max_processes, file_bytes, 0)))

    def environment(self, env: dict) -> dict:
        """The kernel's environment: a few harmless variables of ``env``, a PATH, $HOME in /tmp."""
        kept = {name: value for name, value in env.items()
                if name in _PASSED_ENV or name.startswith(_PASSED_ENV_PREFIXES) or name.endswith(_PASSED_ENV_SUFFIXES)}
        kept.update(PYTHONPATH=os.pathsep.join(_package_folders()),  # the grader's own lmpolicy, not another
                    PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
                    HOME="/tmp", TMPDIR="/tmp", IPYTHONDIR="/tmp/.ipython", MPLCONFIGDIR="/tmp/.matplotlib",
                    # the kernel's parent in its pid namespace is bwrap's init, pid 1: ipykernel then
                    # neither polls a parent it cannot see nor prints its console banner
                    JPY_PARENT_PID="1")
        return kept

    def command(self, kernel_argv: list[str], env: dict, limits: list[str] = ()) -> list[str]:
        """The bwrap command line that runs ``kernel_argv`` in the sandbox (``limits``: more prlimit options)."""
        work = WORK_FOLDER
        argv = self.cgroup.join_command() if self.cgroup is not None else []
        argv += [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session",
                "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--hostname", "sandbox"]
        if self.uid is None:
            argv.append("--unshare-user")  # unprivileged: the namespaces need a user namespace
        else:
            argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # for setpriv, which drops them
        for system in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc"):
            if os.path.islink(system):
                argv += ["--symlink", os.readlink(system), system]
            elif os.path.isdir(system):
                argv += ["--ro-bind", system, system]
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--size", str(self.scratch_bytes), "--tmpfs", "/tmp"]
        mounts = [("--ro-bind", str(folder), str(folder)) for folder in self.readable]
        mounts += [("--ro-bind", str(self.empty / ("folder" if path.is_dir() else "file")), str(path))
                   for path in self._covered()]
        mounts.append(("--ro-bind", str(self.library), str(library_view.library_folder())))
        mounts += [("--perms", "0777", "--size", str(self.scratch_bytes), "--tmpfs", work),
                   ("--bind", str(self.sockets), str(self.sockets))]
        mounts.append(("--ro-bind", str(self.staged), STAGED_FILES))  # bound even empty: stage() fills it later
        made = set()
        for mount in mounts:
            # bwrap would make the missing parents of a mount point private (0700): make them searchable
            for parent in reversed(Path(mount[-1]).parents[:-1]):
                if parent not in made and str(parent) not in ("/tmp", "/usr", "/etc"):
                    argv += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            argv += mount
        argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", work, "--clearenv"]
        for name, value in sorted(self.environment(env).items()):
            argv += ["--setenv", name, value]
        prlimits = [f"--{name.lower()}={value}" for name, value in self.limits().items()]
        argv += ["--", shutil.which("prlimit") or "prlimit", *prlimits, *limits, "--"]
        if self.uid is not None:
            argv += [shutil.which("setpriv") or "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}",
                     "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        if self._has_staged_files():
            argv += ["/bin/sh", "-c", f'{shlex.join(COPY_STAGED_FILES)} && exec "$@"', "sh"]
        return argv + list(kernel_argv)

    def remove(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.private, ignore_errors=True)
