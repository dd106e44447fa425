"""Running async or loop-owning code from a test, whatever else holds the test's thread.

While a browser is open (tests/browser's ``chromium``), Playwright's event loop runs in the pytest worker's
main thread, where ``asyncio.run()`` and jupyter_core's ``run_sync`` then refuse to start. A thread of its
own has no loop."""
from __future__ import annotations

import asyncio
import concurrent.futures


def in_own_thread(function, *args, **kwargs):
    """``function(*args, **kwargs)`` called in a fresh thread; its result returned, its error raised."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args, **kwargs).result()


def run_coroutine(coroutine):
    """``coroutine`` run to its end on an event loop of its own."""
    return in_own_thread(asyncio.run, coroutine)
