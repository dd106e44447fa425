"""Kernels forked from a process that has already imported what they need: the trusted test kernels, and the
grading kernels into their sandboxes.

Every notebook gets a trusted test kernel of its own (``kernels.trusted_kernel.TrustedKernelManager``). Started from
nothing, that kernel spends over a second importing torch before it can run a test: a CPU second per
notebook, which on a 2-core machine grading a class is a third of the work. So it is forked instead,
from a *zygote*: one Python process per grader process, started when GradingExecute is made (or else
with the first trusted kernel), that imports ``PRELOAD`` and then forks a kernel for each request. A forked kernel is ready in about 0.4 s,
and every one starts from the same untouched state: nothing of one notebook's tests (the random
generators, a module's attributes) reaches the next, as it would in a kernel reused for notebook after
notebook. (Python's ``multiprocessing`` forkserver does not fit: each child it forks re-runs the
parent's ``__main__`` module, which is nbgrader's or Jupyter server's command.)

``ForkedKernelProvisioner`` is the jupyter_client kernel provisioner that does it (entry point
``lmpolicy-forked``, named in the trusted kernel's spec). It is jupyter_client's local provisioner but
for the launch: the kernel's command line stays what it would run (``prlimit``, the grader's Python,
``ipykernel_launcher`` and its arguments), and the forked child applies the same memory limit,
environment and working folder itself. The child leads a process group of its own, so that an
interrupt or a kill reaches the kernel and what it started, never the grader. The zygote ends when the
grader's process does (its end of the socket closes), and each kernel ends when the zygote does
(ipykernel's parent poller), as a kernel ends with its parent.

The kernel is not the grader's child, so the provisioner follows it through a pidfd (Linux 5.3+);
its exit status stays with the zygote, which reaps it: ``poll`` says only that it ended (``ENDED``).
Where pidfds are missing, or the zygote fails to fork (it cannot start, it ended mid-request), the
kernel is started from its command line as before, with a warning.

The grading kernels have a zygote of their own (``GRADING_ZYGOTE``), which imports nothing of the course: its
child enters the sandbox bwrap made for its notebook (``isolation.entering``) before it becomes the kernel, and
a module the zygote held would be in the child's memory whatever the sandbox mounts. ``GradingKernelManager``
asks it for each sandboxed kernel and follows the kernel and its sandbox as one (``SandboxedForkedProcess``).
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import traceback
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning import LocalProvisioner
from traitlets import Int

PROVISIONER_NAME = "lmpolicy-forked"
# What the zygote imports before it forks a kernel: what the trusted kernel runs at its start.
PRELOAD = ["numpy", "torch", "ipykernel.kernelapp", "lmpolicy.notebook.checks", "lmpolicy_grader.trusted_tests.in_kernel"]
# What the grading kernels' zygote imports: nothing of the course. Its children enter a sandbox
# (``isolation.entering``), and a module it held would be in their memory whatever the sandbox mounts.
GRADING_PRELOAD = ["numpy", "torch", "ipykernel.kernelapp", "lmpolicy_grader.isolation.entering"]
COURSE_PACKAGES = ("lmpolicy",)
LAUNCHER = "ipykernel_launcher"
ENDED = -1  # what poll() says of a forked kernel that has ended (its status stays with the zygote)


@cache
def provisioner_installed() -> bool:
    """Is ``ForkedKernelProvisioner`` registered with jupyter_client (the course installed with pip, as
    ``make install`` does)? Without it, a spec that names it cannot start at all."""
    return bool(entry_points(group="jupyter_client.kernel_provisioners", name=PROVISIONER_NAME))


class ForkedKernelProvisioner(LocalProvisioner):
    """Launches the kernel by forking it from this process's zygote (see the module's docstring)."""

    memory_bytes = Int(0, help="address-space limit of the forked kernel (bytes; 0: none), as its command "
                               "line's prlimit --as")

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        if not hasattr(os, "pidfd_open") or LAUNCHER not in cmd:
            return await super().launch_kernel(cmd, **kwargs)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            pid = ZYGOTE.fork({"arguments": cmd[cmd.index(LAUNCHER) + 1:], "env": dict(kwargs.get("env") or os.environ),
                               "cwd": cwd, "memory_bytes": self.memory_bytes})
        except ZygoteUnavailable as problem:  # slower, but the notebook is graded all the same
            self.log.warning(f"{problem}; this trusted test kernel starts from its command line instead")
            return await super().launch_kernel(cmd, **kwargs)
        self.process = ForkedProcess(pid)
        self.pid = self.pgid = pid  # the child makes its own group first thing (become_kernel)
        self.cwd = cwd
        return self.connection_info


class ForkedProcess:
    """What the local provisioner asks of its kernel's ``Popen``, for a kernel the zygote forked."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # ended (and reaped) already
            self._pidfd = None

    def poll(self) -> int | None:
        return self.wait(timeout=0)

    def wait(self, timeout: float | None = None) -> int | None:
        if self._pidfd is not None and select.select([self._pidfd], [], [], timeout)[0]:
            os.close(self._pidfd)
            self._pidfd = None
        return ENDED if self._pidfd is None else None

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # a pidfd reaches this kernel only, never a later process with its pid
            with contextlib.suppress(ProcessLookupError):  # it ended between the look and the signal, as Popen's
                signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class SandboxedForkedProcess:
    """The handle of a grading kernel forked into a sandbox: it has ended when the kernel has (or the sandbox),
    and stopping it stops the sandbox, bwrap and its holder, too."""

    stdin = stdout = stderr = None

    def __init__(self, sandbox: subprocess.Popen, kernel: ForkedProcess):
        self.sandbox, self.kernel, self.pid = sandbox, kernel, sandbox.pid

    def poll(self) -> int | None:
        if self.kernel.poll() is None and self.sandbox.poll() is None:
            return None
        self.send_signal(signal.SIGKILL)  # a kernel gone ends its sandbox; a sandbox gone has ended its kernel
        self.sandbox.wait()
        return ENDED

    def wait(self, timeout: float | None = None) -> int | None:
        self.kernel.wait(timeout)
        return self.poll()

    def send_signal(self, signum: int) -> None:
        self.kernel.send_signal(signum)
        if self.sandbox.poll() is None:
            self.sandbox.send_signal(signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ZygoteUnavailable(RuntimeError):
    """The zygote did not fork the kernel (it could not start, or it ended); the message says which."""


class Zygote:
    """This process's zygote of one ``kind`` (``TRUSTED``'s or ``GRADING``'s kernels): started on the first
    ``fork``, started again if it has ended."""

    def __init__(self, kind: str = "trusted"):
        self.kind = kind
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        self._replies = None

    def start_soon(self, env: dict[str, str]) -> None:
        """Start the zygote now, in ``env``, unless it runs: its imports then run beside what this process
        does next, instead of in the first ``fork``."""
        with self._lock:
            self._running(env)

    def fork(self, request: dict) -> int:
        """Have the zygote fork a kernel for ``request`` (``become_kernel``'s arguments); its pid."""
        with self._lock:
            self._running(request["env"])
            try:
                self._socket.sendall(json.dumps(request).encode() + b"\n")
                reply = self._replies.readline()
            except OSError:
                reply = ""
            if reply.startswith("not entered: "):
                raise ZygoteUnavailable(f"a grading kernel forked by the zygote could not enter its sandbox "
                                        f"({reply.removeprefix('not entered: ').strip()})")
            if not reply:
                kernels = {"trusted": "trusted test", "grading": "sandboxed grading"}[self.kind]
                raise ZygoteUnavailable(f"the zygote of the {kernels} kernels ended (exit status "
                                        f"{self._process.wait()}; its error, if any, is above)")
        return int(reply)

    def _running(self, env: dict[str, str]) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        if self._socket is not None:  # the socket of a zygote that ended
            self._replies.close()
            self._socket.close()
        self._start(env)

    def _start(self, env: dict[str, str]) -> None:
        ours, its = socket.socketpair()
        # Started in / (no module there to shadow torch), in the first kernel's environment (its
        # one-thread settings hold for what torch reads as it is imported).
        self._process = subprocess.Popen(
            [sys.executable, "-c",
             f"from lmpolicy_grader.kernels.forked import serve; serve({its.fileno()}, {self.kind!r})"],
            pass_fds=[its.fileno()], stdin=subprocess.DEVNULL, cwd="/", env=env)
        its.close()
        self._socket, self._replies = ours, ours.makefile("r")


ZYGOTE = Zygote("trusted")
GRADING_ZYGOTE = Zygote("grading")


def serve(fd: int, kind: str = "trusted") -> None:
    """The zygote: import its preload, then fork a kernel for every request line on socket ``fd`` until it closes."""
    for module in (PRELOAD if kind == "trusted" else GRADING_PRELOAD):
        import_module(module)
    become = become_kernel
    if kind == "grading":
        if held := sorted(name for name in sys.modules if name.split(".")[0] in COURSE_PACKAGES):
            sys.exit(f"the grading kernels' zygote refuses to fork: it has imported {', '.join(held[:5])}")
        become = become_sandboxed_kernel
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernels are reaped as they end
    requests = socket.socket(fileno=fd)
    lines = requests.makefile("r")
    for line in lines:
        request = json.loads(line)
        told = os.pipe() if kind == "grading" else None  # the child says there whether it entered its sandbox
        pid = os.fork()
        if pid == 0:
            lines.close()
            requests.close()
            if told:
                os.close(told[0])
                request["tell"] = told[1]
            _exit_as(become, **request)
        reply = str(pid)
        if told:
            os.close(told[1])
            with os.fdopen(told[0]) as said:
                if (word := said.readline().strip()) != "entered":
                    reply = f"not entered: {word or 'it ended without a word'}"
        requests.sendall(f"{reply}\n".encode())


def _exit_as(run, **kwargs) -> None:
    """Run ``run`` in a forked child and end the child with its exit status, never returning to the zygote's loop."""
    status = 1
    try:
        run(**kwargs)
        status = 0
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def become_kernel(arguments: list[str], env: dict[str, str], cwd: str, memory_bytes: int) -> None:
    """In the forked child: be the kernel ``python -m ipykernel_launcher <arguments>`` would have been."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    import torch

    torch.set_num_threads(int(env.get("OMP_NUM_THREADS", torch.get_num_threads())))
    from ipykernel.kernelapp import IPKernelApp

    # ipykernel read JPY_PARENT_PID when the zygote imported it: the parent is named on the command line
    IPKernelApp.launch_instance(argv=[*arguments, f"--IPKernelApp.parent_handle={os.getppid()}"])


def become_sandboxed_kernel(arguments: list[str], env: dict[str, str], output: str, sandbox: dict,
                            tell: int) -> None:
    """In the forked child: enter the sandbox (``entering.enter(**sandbox)``), say on ``tell`` whether it did, and
    be the kernel ``python -m ipykernel_launcher <arguments>`` would have been there, its stdout and stderr
    ``output`` (the path of the grader's pipe, ``drained_pipe``) and its stdin /dev/null, and no other descriptor."""
    from lmpolicy_grader.isolation.entering import enter  # imported by the zygote already

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # a write past the sandbox's file-size limit fails with EFBIG ("File too large"), never kills the kernel
    # unheard: as Python's own start does, whatever the zygote was started with
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    pipe = os.open(output, os.O_WRONLY)
    if not stat.S_ISFIFO(os.fstat(pipe).st_mode):
        raise ValueError(f"the kernel's output must be a pipe, and {output} is not one")
    quiet = os.open(os.devnull, os.O_RDONLY)
    for source, target in ((quiet, 0), (pipe, 1), (pipe, 2)):
        os.dup2(source, target)
    for low, high in ((3, tell), (tell + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])):
        os.closerange(low, high)  # nothing of the zygote's goes in
    try:
        enter(**sandbox)
    except BaseException as error:
        os.write(tell, f"{error}\n".encode(errors="replace"))
        raise
    os.write(tell, b"entered\n")
    os.close(tell)
    os.environ.clear()
    os.environ.update(env)
    import torch

    torch.set_num_threads(int(env.get("OMP_NUM_THREADS", "1")))
    from ipykernel.kernelapp import IPKernelApp

    # the zygote's import path holds "" (its own start folder): here that is the submission's folder, which
    # the kernel's command line keeps off the import path (``ignore_cwd``), so the child drops it as well
    sys.path[:] = [path for path in sys.path if path not in ("", ".") and os.path.abspath(path) != os.getcwd()]
    IPKernelApp.launch_instance(argv=arguments)
