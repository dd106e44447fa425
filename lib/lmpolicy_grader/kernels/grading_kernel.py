"""The grading kernel: an IPython kernel under memory and CPU-time limits, one thread, in the sandbox.

The grading kernel's command line is the stock ipykernel's wrapped in ``prlimit`` (util-linux):

    prlimit --as=<bytes> --cpu=<seconds> -- python -m ipykernel_launcher -f {connection_file}
            --ext=lmpolicy_grader.trusted_tests.call_server --ext=lmpolicy_grader.kernels.moving_in

``call_server`` answers the trusted tests' channel (registered before any submitted code runs);
``moving_in`` gives a kernel started ahead of its notebook that notebook's folder.

``--as`` caps the address space, so a memory bomb gets a MemoryError instead of taking the machine;
``--cpu`` kills a kernel that burns more CPU seconds than any honest notebook needs. BLAS, OpenMP
and torch get one thread each, so N parallel kernels use N cores and no more.

GradingKernelManager runs that command in a sandbox (``sandbox.py``: no view of the course, no
network, a process cap, bounded scratch space; the student library as ``library_view`` shows it for the
notebook being graded, without the functions that answer its exercises), talking to the kernel over ZMQ ipc sockets in the
sandbox's private folder; ``sandbox = False`` turns it off.

Started from that command line, a kernel spends about two CPU-seconds importing torch and ipykernel, most of a
short notebook's grading. So by default (``forked``) bwrap runs a holder in the sandbox instead, and the kernel is
forked into it from ``kernels.forked.GRADING_ZYGOTE``, which has imported them (``isolation.entering`` says how it
gets in, with the same limits). Where that fails the kernel starts from its command line, with one warning.

Either way the kernel holds no descriptor of a file of the host: its standard input is ``/dev/null`` and its
standard output and error a pipe the grader drains into a bounded tail (``drained_pipe``), and so are those of
bwrap, its init and the holder, which it could reach through ``/proc/<pid>/fd``. Every file it writes in the
sandbox is bounded by ``file_bytes`` (``prlimit --fsize``; entering sets it on a forked kernel).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, DottedObjectName, Float, Int, default

from lmpolicy import arithmetic
from lmpolicy_grader.isolation import library_view
from lmpolicy_grader.isolation.cgroup import cgroup_problem
from lmpolicy_grader.isolation.entering import HOLDER, EnteringFailed, find_holder
from lmpolicy_grader.isolation.sandbox import (COPY_STAGED_FILES, DEFAULT_MAX_PROCESSES, DEFAULT_SCRATCH_BYTES,
                                               WORK_FOLDER, Sandbox, require_sandbox)
from lmpolicy_grader.kernels.drained_pipe import DrainedPipe
from lmpolicy_grader.kernels.forked import (GRADING_ZYGOTE, LAUNCHER, ForkedProcess, SandboxedForkedProcess,
                                            ZygoteUnavailable)

KERNEL_NAME = "lmpolicy-grader"
MOVING_IN = "lmpolicy_grader.kernels.moving_in"
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}
# The course's limits (nbgrader_config.py may change them): no honest ch11 notebook comes near either.
DEFAULT_MEMORY_BYTES = 3 * 1024**3
DEFAULT_CPU_SECONDS = 600


def grading_kernel_spec(memory_bytes: int = DEFAULT_MEMORY_BYTES, cpu_seconds: int = DEFAULT_CPU_SECONDS,
                        python: str = sys.executable) -> dict:
    """The kernel.json of the grading kernel, as a dict."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise RuntimeError("the grading kernel needs `prlimit` (Debian/Ubuntu package util-linux) on PATH")
    return {
        "argv": [prlimit, f"--as={memory_bytes}", f"--cpu={cpu_seconds}", "--",
                 python, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--ext=lmpolicy_grader.trusted_tests.call_server",
                 f"--ext={MOVING_IN}",
                 # its folder (the submission's files) is never on the import path: a handed-in matplotlib/ or
                 # statistics.py would otherwise stand in for a module the code rule allows, and run code
                 # the rule never read (the folder's data files stay readable)
                 "--IPKernelApp.ignore_cwd=True",
                 "--IPKernelApp.log_level=ERROR"],
        "display_name": "Python 3 (lmpolicy grader, limited)",
        "language": "python",
        "env": dict(ONE_THREAD, **arithmetic.PINNED, MPLBACKEND="Agg"),
        "metadata": {"debugger": False},
    }


def install_grading_kernel(prefix_dir: Path, **limits) -> Path:
    """Write ``<prefix_dir>/lmpolicy-grader/kernel.json`` (for formgrader or `jupyter kernelspec`)."""
    kernel_dir = Path(prefix_dir) / KERNEL_NAME
    kernel_dir.mkdir(parents=True, exist_ok=True)
    (kernel_dir / "kernel.json").write_text(json.dumps(grading_kernel_spec(**limits), indent=1) + "\n")
    return kernel_dir


_warned: set[str] = set()


def warn_once(log, message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


class GradingKernelManager(AsyncKernelManager):
    """Starts the grading kernel whatever kernelspec a notebook names (none needs installing)."""

    client_class = DottedObjectName("lmpolicy_grader.kernels.ready_client.ReadyKernelClient")

    memory_bytes = Int(DEFAULT_MEMORY_BYTES, help="address-space limit of the kernel (bytes)").tag(config=True)
    cpu_seconds = Int(DEFAULT_CPU_SECONDS, help="CPU-time limit of the kernel (seconds)").tag(config=True)
    sandbox = Bool(True, help="run the kernel in the bubblewrap sandbox (False only for trusted "
                              "submissions: the kernel can then read the whole course)").tag(config=True)
    max_processes = Int(DEFAULT_MAX_PROCESSES, help="processes and threads the sandboxed kernel may run").tag(config=True)
    scratch_bytes = Int(DEFAULT_SCRATCH_BYTES, help="size of the sandbox's /tmp and of its working folder, "
                                                    "each (bytes)").tag(config=True)
    file_bytes = Int(help="the largest file the sandboxed kernel may write anywhere (bytes; prlimit --fsize: a "
                          "write past it fails with 'File too large'); by default scratch_bytes").tag(config=True)
    cgroup = Bool(True, help="also cap the whole sandbox (all its processes together) in a control group: "
                             "memory_bytes of memory, max_processes, cpu_cores of CPU; where none can be made "
                             "(not root), grading warns once and the per-process limits stand alone").tag(config=True)
    cpu_cores = Float(1.0, help="CPU cores a sandbox may use at once, however many processes it runs "
                                "(the grading kernel runs one thread)").tag(config=True)
    forked = Bool(True, help="fork the sandboxed kernel from a zygote that has imported torch, numpy and ipykernel "
                             "(and nothing of the course), into the sandbox bwrap made (isolation.entering), "
                             "instead of starting it from its command line there").tag(config=True)

    _sandbox: Sandbox | None = None
    _output: DrainedPipe | None = None  # the kernel's stdout and stderr (and its sandbox's): a pipe, never a file
    _awaiting_notebook = False  # started before its notebook was known (a spare, ``spares``): move_in comes later
    _forked_start: dict | None = None  # the kernel's command line and environment, when it is to be forked
    _fork_failed = False  # the zygote could not fork into the sandbox once: this kernel starts from its command line

    @default("file_bytes")
    def _file_bytes_default(self) -> int:
        return self.scratch_bytes

    @property
    def kernel_spec(self):
        if self._kernel_spec is None:
            spec = grading_kernel_spec(self.memory_bytes, self.cpu_seconds)
            if self.sandbox:  # a signal would reach bwrap, not the kernel: interrupt over the control channel
                spec["interrupt_mode"] = "message"
            self._kernel_spec = KernelSpec(resource_dir="", **spec)
        return self._kernel_spec

    def recipe(self) -> tuple:
        """What a kernel of this manager started now is made of (its limits, command line and the
        environment it inherits): a spare serves a notebook whose recipe is its own."""
        return (type(self).__name__, self.sandbox, self._forks(), self.max_processes, self.scratch_bytes,
                self.file_bytes, self._group_limits(),
                json.dumps(self.kernel_spec.to_dict(), sort_keys=True), tuple(sorted(os.environ.items())))

    async def start_for_a_later_notebook(self, **kw) -> None:
        """Start the kernel before its notebook is known (a spare, ``spares``); ``move_in``
        gives it its notebook folder before any of the notebook's code runs."""
        self._awaiting_notebook = True
        await self.start_kernel(**kw)

    def can_take(self, notebook_dir: Path) -> bool:
        """Can this kernel, started for a later notebook, serve ``notebook_dir`` without its sandbox
        showing it (a course inside the Python installation)?"""
        return self._awaiting_notebook and not (self._sandbox is not None and self._sandbox.shows(notebook_dir))

    async def move_in(self, notebook_dir: Path) -> dict | None:
        """Before the first cell of a kernel started for a later notebook: close its sockets folder,
        stage ``notebook_dir``'s files, and return the arguments of ``moving_in.take_files`` that
        give the kernel its notebook's folder (None: nothing to take)."""
        self._awaiting_notebook = False
        if self._sandbox is None:  # unsandboxed, the kernel works in the notebook's folder itself
            return {"folder": str(notebook_dir)}
        await self._seal()
        self._sandbox.show_library(library_view.view(library_view.graded_notebook()))
        if not self._sandbox.stage(notebook_dir):
            return None
        return {"copy_command": list(COPY_STAGED_FILES)}

    def _group_limits(self) -> dict | None:
        """The sandbox's control-group limits (None: no group, see ``cgroup``)."""
        if not (self.sandbox and self.cgroup):
            return None
        problem = cgroup_problem()
        if problem is not None:
            warn_once(self.log, f"each sandbox's processes are limited one by one, not together: {problem}")
            return None
        return {"memory_bytes": self.memory_bytes, "cpu_cores": self.cpu_cores}

    async def _seal(self) -> None:
        ports = (self.shell_port, self.iopub_port, self.stdin_port, self.hb_port, self.control_port)
        await self._sandbox.seal([f"{self.ip}-{port}" for port in ports], self.provisioner.process.pid)

    async def _async_pre_start_kernel(self, **kw):
        if self._output is None or self._output.write_fd < 0:  # a kernel that dies at start-up says why there
            self._output = DrainedPipe()
        # the only descriptors the kernel's command gets (Popen closes the others): a file here would be a door
        kw.update(stdin=subprocess.DEVNULL, stdout=self._output.write_fd, stderr=self._output.write_fd)
        if self.sandbox and self._sandbox is None:
            require_sandbox()
            folder = None if self._awaiting_notebook else Path(kw.get("cwd") or os.getcwd())
            notebook = None if self._awaiting_notebook else library_view.graded_notebook()
            self._sandbox = Sandbox.create(folder, self.max_processes, self.scratch_bytes, self._group_limits(),
                                           library=library_view.view(notebook), file_bytes=self.file_bytes)
            self.transport, self.cache_ports = "ipc", False
            self.ip = str(self._sandbox.sockets / "kernel")
            self.connection_file = str(self._sandbox.sockets / "kernel.json")
        return await super()._async_pre_start_kernel(**kw)

    def write_connection_file(self, **kwargs):
        super().write_connection_file(**kwargs)
        if self._sandbox is not None:
            self._sandbox.let_read(Path(self.connection_file))

    async def _async_post_start_kernel(self, **kw):
        await super()._async_post_start_kernel(**kw)
        if self._sandbox is not None and not self._awaiting_notebook:  # a spare is sealed by move_in, when it is ready
            await self._seal()

    def _forks(self) -> bool:
        return self.sandbox and self.forked and not self._fork_failed and hasattr(os, "pidfd_open")

    def format_kernel_cmd(self, extra_arguments=None):
        command = super().format_kernel_cmd(extra_arguments)
        if self._sandbox is None:
            return command
        env = {**os.environ, **(self._launch_args or {}).get("env", {}), **self.kernel_spec.env}
        if not self._forks():
            self._forked_start = None
            return self._sandbox.command(command, env)
        # bwrap makes the sandbox and runs a holder in it; _async_launch_kernel forks the kernel into it
        self._forked_start = {"command": command, "env": self._sandbox.environment(env)}
        return self._sandbox.command(HOLDER, env)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        await super()._async_launch_kernel(kernel_cmd, **kw)
        if self._forked_start is None:
            return
        sandbox = self.provisioner.process
        try:
            holder = await asyncio.to_thread(find_holder, sandbox.pid)
            kernel = await asyncio.to_thread(GRADING_ZYGOTE.fork, self._fork_request(holder))
        except (EnteringFailed, ZygoteUnavailable) as problem:  # slower, but the notebook is graded all the same
            warn_once(self.log, f"{problem}; the sandboxed kernels start from their command line instead")
            self._fork_failed = True
            await self.provisioner.kill()
            await self.provisioner.wait()
            await super()._async_launch_kernel(self.format_kernel_cmd(), **kw)
            return
        self.provisioner.process = SandboxedForkedProcess(sandbox, ForkedProcess(kernel))

    def _fork_request(self, holder: int) -> dict:
        """What the zygote's child needs to be this kernel in the sandbox that ``holder`` runs in
        (``forked.become_sandboxed_kernel``): the command line's arguments, the limits prlimit sets there, and
        the pipe its output goes to (which the zygote, a process of the grader's uid, opens through /proc)."""
        command = self._forked_start["command"]  # prlimit --as=.. --cpu=.. -- python -m ipykernel_launcher ...
        limits = {"AS": self.memory_bytes, "CPU": self.cpu_seconds, **self._sandbox.limits()}
        cgroup = self._sandbox.cgroup
        return {"arguments": command[command.index(LAUNCHER) + 1:], "env": self._forked_start["env"],
                "output": f"/proc/{os.getpid()}/fd/{self._output.write_fd}",
                "sandbox": {"holder_pid": holder, "workdir": WORK_FOLDER, "uid": self._sandbox.uid, "limits": limits,
                            "cgroup_folders": [str(folder) for folder in cgroup.folders] if cgroup else []}}

    def error_output(self, limit: int = 600) -> str:
        """The end of what the kernel wrote to its output and error output (at most ``limit`` characters)."""
        if self._output is None:
            return ""
        return self._output.tail().decode(errors="replace").strip()[-limit:]

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._sandbox is not None and not restart:
            self._sandbox.remove()
            self._sandbox = None
        if self._output is not None and not restart:  # its tail stays readable: error_output
            self._output.close()

    cleanup_resources = _async_cleanup_resources
