"""The only way out of a grading kernel's standard output and error: a pipe the grader drains, keeping a bounded tail.

A file would be a door to the host: a kernel that holds a descriptor of it (or reaches one through
``/proc/<pid>/fd`` of a process beside it in the sandbox) writes there as much as it likes, however small its
sandbox's folders. A pipe holds at most its buffer; a thread of the grader reads it as fast as it fills and keeps
only the last ``tail_bytes`` (what a kernel that dies at start-up said, for its notebook's reason), so whatever the
kernel writes costs the grader no disk and a bounded memory.
"""
from __future__ import annotations

import os
import select
import threading

DEFAULT_TAIL_BYTES = 64 * 1024


class DrainedPipe:
    """One kernel's standard output and error (``write_fd``, for its launch), drained into a tail of ``tail_bytes``."""

    def __init__(self, tail_bytes: int = DEFAULT_TAIL_BYTES):
        self.tail_bytes = tail_bytes
        self._read_fd, self.write_fd = os.pipe()  # neither inherited by another child of the grader (PEP 446)
        os.set_blocking(self._read_fd, False)
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="kernel-output-drain", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        readable = select.poll()
        readable.register(self._read_fd, select.POLLIN)
        while True:
            readable.poll()
            with self._lock:
                if not self._read_available():
                    os.close(self._read_fd)  # every writer has closed its end: the kernel, its sandbox, the grader
                    self._read_fd = -1
                    return

    def _read_available(self) -> bool:
        """Read what the pipe holds now into the tail (under the lock); False once every writer has closed it."""
        if self._read_fd < 0:
            return False
        while True:
            try:
                chunk = os.read(self._read_fd, 1 << 16)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            self._tail += chunk
            del self._tail[:-self.tail_bytes]

    def tail(self) -> bytes:
        """The last ``tail_bytes`` written, including what the pipe holds right now."""
        with self._lock:
            self._read_available()
            return bytes(self._tail)

    def close(self) -> None:
        """Close the grader's own write end: the drain ends once the kernel's processes have ended too."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1
