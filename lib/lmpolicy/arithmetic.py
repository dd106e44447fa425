"""The same floating-point arithmetic on every x86-64 machine, so that a seeded run gives the same numbers.

torch picks its kernels by the processor it finds, and so do the two Intel libraries inside it: MKL (its
matrix products on x86) and oneDNN (some element-wise layers, TinyLM's GELU among them). Each path rounds
in a different order. One forward pass differs only in the last bits, but training amplifies that: the
same seeded REINFORCE run of notebook 08 (``python -m lmpolicy.tinylm.reinforce``) reached its target at
update 90 on one machine, and on an AMD EPYC at update 100 with torch's AVX-512 kernels and 130 with its
AVX2 ones.

So, before torch computes anything, the course pins all three choices:

* ``ATEN_CPU_CAPABILITY=avx2``: torch's own kernels take their AVX2 path (every Intel or AMD laptop since
  about 2015 has it); a processor without AVX2 falls back to the plain path, and its numbers differ;
* ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN's generated kernels stop at AVX2 too. oneDNN does not read torch's
  setting: with only the two others pinned, notebook 08's run still reached its target at update 100
  where the processor had AVX-512 and at 110 where it had not (GELU by oneDNN's AVX-512 code);
* ``MKL_CBWR=COMPATIBLE``: MKL's conditional numerical reproducibility on its SSE2 path, the one branch that
  gives the same results on Intel and AMD processors alike. It costs speed (REINFORCE 1.35-1.65x slower
  than MKL's own choice on two kinds of AMD EPYC), the price of a notebook whose prose can quote its numbers.

All are read when torch runs its first operation, not when it is imported, so importing ``lmpolicy``
right after ``import torch`` is in time. Apple-silicon Macs have none of them (torch runs NEON kernels
there): their runs land near, not on, the quoted numbers.
"""
from __future__ import annotations

import os
import sys
import warnings

PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}


def pin() -> None:
    """Pin torch's, oneDNN's and MKL's code paths (unless the environment already chose them); if torch is already
    imported, check that it had not yet computed anything (torch is not imported here: the grader's own
    process imports parts of lmpolicy and has no use for it)."""
    for name, value in PINNED.items():
        os.environ.setdefault(name, value)
    torch = sys.modules.get("torch")
    if torch is None:
        return
    capability = torch.backends.cpu.get_cpu_capability()  # fixed by torch's first operation, from then on
    if capability.startswith("AVX512") and os.environ["ATEN_CPU_CAPABILITY"] == PINNED["ATEN_CPU_CAPABILITY"]:
        warnings.warn("torch computed something before lmpolicy was imported, so it runs its AVX-512 kernels "
                      "and seeded runs will not give the numbers the notebook quotes: restart the kernel and "
                      "run the notebook from its first cell", RuntimeWarning, stacklevel=3)
