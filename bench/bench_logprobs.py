"""What slicing before the log-softmax saves in backward: memory kept, peak memory and time, side by side.

    python bench/bench_logprobs.py [--batch 4 --length 64 --vocab 32000 --prompt-len 32 --repeats 20]

Three ways to get the response tokens' log-probs from logits (B, L, V) that require a gradient:

* ``full, then slice``: log-softmax over all L - 1 columns, gather, then drop the prompt's columns
  (what ``response_logprobs`` did before);
* ``slice, then log-softmax``: keep only the columns that predict response tokens, then log-softmax and
  gather (``lmpolicy.tinylm.logprobs.response_logprobs`` today);
* ``slice, chosen - logsumexp``: the chosen logit minus the logsumexp of its column (TRL's
  ``selective_log_softmax`` for float32), which keeps no (B, R, V) tensor of its own for backward.

For each: the bytes autograd keeps for backward (every saved tensor but the logits, counted once per
storage), the rise of the peak resident memory over one forward + backward, the gradient of the logits
included (each case in a fresh process, Linux only), and the median time of forward + backward here.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from lmpolicy.tinylm.logprobs import response_logprobs


def full_then_slice(logits, ids, prompt_len):
    logp = F.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)[:, prompt_len - 1:]


def chosen_minus_logsumexp(logits, ids, prompt_len):
    predicting = logits[:, prompt_len - 1:-1]
    chosen = predicting.gather(-1, ids[:, prompt_len:].unsqueeze(-1)).squeeze(-1)
    return chosen - torch.logsumexp(predicting, dim=-1)


CASES = {"full, then slice": full_then_slice, "slice, then log-softmax": response_logprobs,
         "slice, chosen - logsumexp": chosen_minus_logsumexp}


def inputs(args):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(args.batch, args.length, args.vocab, generator=gen).requires_grad_(True)
    ids = torch.randint(args.vocab, (args.batch, args.length), generator=gen)
    return logits, ids


def saved_bytes(fn, logits, ids, prompt_len) -> int:
    """Bytes of the tensors autograd saves for backward, each storage counted once, the logits' own left out
    (they exist whichever way the log-probs are computed)."""
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() != logits.untyped_storage().data_ptr():
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(logits, ids, prompt_len).sum()
    return sum(storages.values())


def peak_rise_in_a_fresh_process(name: str, args) -> int:
    """Peak resident memory of one forward + backward minus the resident memory before it, in bytes."""
    command = [sys.executable, __file__, "--measure-peak", name, "--batch", str(args.batch), "--length",
               str(args.length), "--vocab", str(args.vocab), "--prompt-len", str(args.prompt_len)]
    return int(subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()[-1])


def resident_kib(field: str) -> int:
    """VmRSS (now) or VmHWM (the peak since the last reset) of this process, in KiB (Linux)."""
    status = open("/proc/self/status").read()
    return int(re.search(rf"{field}:\s+(\d+) kB", status).group(1))


def measure_peak(name: str, args) -> None:
    torch.set_num_threads(1)
    logits, ids = inputs(args)
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak to the current resident size
        f.write("5")
    before = resident_kib("VmRSS")
    CASES[name](logits, ids, args.prompt_len).sum().backward()
    print((resident_kib("VmHWM") - before) * 1024)


def median_ms(fn, logits, ids, prompt_len, repeats: int) -> float:
    times = []
    for _ in range(repeats + 2):  # two warm-up rounds
        logits.grad = None
        start = time.perf_counter()
        fn(logits, ids, prompt_len).sum().backward()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times[2:])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=32_000)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--measure-peak", choices=list(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure_peak:
        return measure_peak(args.measure_peak, args)
    torch.set_num_threads(1)
    logits, ids = inputs(args)
    reference = full_then_slice(logits, ids, args.prompt_len)
    mb = 1e6
    print(f"B = {args.batch}, L = {args.length}, V = {args.vocab:,}, prompt_len = {args.prompt_len} "
          f"(R = {args.length - args.prompt_len} response columns); the logits are "
          f"{logits.numel() * logits.element_size() / mb:.1f} MB, float32, one thread")
    rows = {}
    for name, fn in CASES.items():
        out = fn(logits, ids, args.prompt_len)
        assert torch.allclose(out, reference, atol=1e-4), f"{name} does not compute the same log-probs"
        rows[name] = (saved_bytes(fn, logits, ids, args.prompt_len) / mb,
                      peak_rise_in_a_fresh_process(name, args) / mb,
                      median_ms(fn, logits, ids, args.prompt_len, args.repeats))
    before = rows["full, then slice"]
    print(f"{'':28s}{'kept for backward':>19s}{'peak rise':>13s}{'fwd + bwd':>12s}   ratio to before (kept, peak, time)")
    for name, (kept, peak, ms) in rows.items():
        print(f"{name:28s}{kept:16.1f} MB{peak:10.1f} MB{ms:9.1f} ms   "
              f"{kept / before[0]:.2f}, {peak / before[1]:.2f}, {ms / before[2]:.2f}")


if __name__ == "__main__":
    main()
