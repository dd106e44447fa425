"""A grading kernel's output pipe: drained as fast as it is written, of which only a bounded tail is kept."""
from __future__ import annotations

import os
import subprocess
import sys

from lmpolicy_grader.kernels.drained_pipe import DrainedPipe


def test_whatever_is_written_only_the_last_tail_bytes_are_kept_and_the_writer_never_waits():
    pipe = DrainedPipe(tail_bytes=1024)
    # 64 MiB, 1,000 times the pipe's buffer: a writer nobody drained would block after the first 64 KiB
    writer = subprocess.run([sys.executable, "-c", "import os\nfor _ in range(64):\n    os.write(1, b'x' * 2**20)\n"
                                                   "os.write(1, b'the end')"],
                            stdout=pipe.write_fd, stderr=subprocess.STDOUT, timeout=600)
    assert writer.returncode == 0
    tail = pipe.tail()
    assert len(tail) == 1024 and tail.endswith(b"x" * 100 + b"the end")
    pipe.close()
    pipe._thread.join(timeout=60)
    assert not pipe._thread.is_alive()  # every writer closed: the drain ended and closed its end
    assert pipe.tail() == tail


def test_what_a_kernel_said_just_before_it_died_is_in_the_tail_at_once():
    pipe = DrainedPipe()
    os.write(pipe.write_fd, b"Traceback: no module named torch\n")
    assert pipe.tail() == b"Traceback: no module named torch\n"  # read by tail itself if the drain has not yet
    pipe.close()
