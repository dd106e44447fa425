"""Servers start in turn: a class that logs in at once waits in a queue instead of being killed.

A JupyterLab server's start is mostly CPU (Python imports): twenty of them started together on two cores
each get a tenth of a core, all of them take twenty times as long, and JupyterHub kills every server that
has not answered within `Spawner.http_timeout` of its launch. `concurrent_spawn_limit` does not help:
the starts beyond it are refused with "Too many users trying to log in right now", and the students who
try again arrive together and are killed the same way.

Here a hub lets `slots` servers load at a time (two per core by default) and keeps the others in a queue, in
order of arrival. A queued student's start is pending, and the spawn page (JupyterHub's progress events)
tells them their place: "Waiting for a free start slot: you are 5th in line". A server holds its slot from
its launch until it answers HTTP, so the time each server is given to load (`http_timeout`) is measured with
the machine shared by `slots` starts, never by the whole class; the queue's wait counts in
`Spawner.start_timeout`, which must cover a class's queue (deploy/jupyterhub_config.py).

`QueuedLocalProcessSpawner` is LocalProcessSpawner with that queue; the queue itself (`StartQueue`) knows
nothing of spawners, so another spawner class can wait on it the same way.
"""
from __future__ import annotations

import asyncio
import contextlib
import os

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import wait_for_http_server
from traitlets import Integer, default


class StartQueue:
    """At most `slots` holders at once; the others wait in order of arrival and can ask their place."""

    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"a start queue needs at least one slot, got {slots}")
        self.slots = slots
        self.holders: set[object] = set()
        self.waiting: list[tuple[object, asyncio.Future]] = []

    def place(self, who: object) -> int | None:
        """1 for the first in line, 2 for the next, ...; None when ``who`` is not waiting."""
        for number, (waiter, _) in enumerate(self.waiting, start=1):
            if waiter is who:
                return number
        return None

    @contextlib.asynccontextmanager
    async def turn(self, who: object):
        """Hold a slot for the body of the ``async with``; wait in line first if every slot is taken.
        A waiter cancelled (the hub's start_timeout, the user stopped the start) leaves the line."""
        if len(self.holders) < self.slots and not self.waiting:
            self.holders.add(who)
        else:
            ticket = asyncio.get_running_loop().create_future()
            self.waiting.append((who, ticket))
            try:
                await ticket
            except BaseException:
                if ticket.done() and not ticket.cancelled():  # given the slot just as it was cancelled
                    self._leave(who)
                else:
                    self.waiting = [(w, t) for w, t in self.waiting if w is not who]
                raise
        try:
            yield
        finally:
            self._leave(who)

    def _leave(self, who: object) -> None:
        self.holders.discard(who)
        while self.waiting and len(self.holders) < self.slots:
            waiter, ticket = self.waiting.pop(0)
            if not ticket.done():
                self.holders.add(waiter)
                ticket.set_result(None)


_QUEUES: dict[int, StartQueue] = {}


def shared_queue(slots: int) -> StartQueue:
    """The hub's one queue of that size: every spawner of the hub waits on the same line."""
    if slots not in _QUEUES:
        _QUEUES[slots] = StartQueue(slots)
    return _QUEUES[slots]


class QueuedLocalProcessSpawner(LocalProcessSpawner):
    """LocalProcessSpawner whose start waits its turn in the hub's StartQueue (see the module's docstring)."""

    start_slots = Integer(
        help="How many servers may load at once; the others wait in line. Default: two per core. A start is "
             "mostly CPU, but on a hub the students' kernels share the cores, and two starts per core held "
             "their share better (bench/bench_hub.py, docs/deployment.md); many more only slow each start.",
    ).tag(config=True)

    @default("start_slots")
    def _default_start_slots(self):
        return 2 * max(1, len(os.sched_getaffinity(0)))

    @property
    def queue(self) -> StartQueue:
        return shared_queue(self.start_slots)

    # where this spawner's start is: None (not yet in start, or done), "in line", "loading" (holds a slot)
    _start_stage = None

    async def start(self):
        self._start_stage = "in line"
        try:
            async with self.queue.turn(self):
                self._start_stage = "loading"
                self.log.info("%s has a start slot (%d of %d taken, %d waiting)", self._log_name,
                              len(self.queue.holders), self.queue.slots, len(self.queue.waiting))
                ip, port = await super().start()
                await self._until_answering(f"http://{ip}:{port}{self.server.base_url if self.server else '/'}")
        finally:
            self._start_stage = None
        return ip, port

    async def _until_answering(self, url: str) -> None:
        """Hold the slot until the server answers HTTP (or has died, or http_timeout has passed: it fails)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.http_timeout
        while True:
            status = await self.poll()
            if status is not None:
                raise RuntimeError(f"{self._log_name}'s server exited with status {status} before it answered")
            remaining = deadline - loop.time()
            if remaining <= 0:
                await self.stop(now=True)
                raise TimeoutError(f"{self._log_name}'s server did not answer within {self.http_timeout} s "
                                   "of its launch (Spawner.http_timeout)")
            try:
                await wait_for_http_server(url, timeout=min(5, remaining))
                return
            except TimeoutError:
                continue

    async def progress(self):
        """What the spawn page shows: the place in line while queued, then that the server is loading."""
        shown = None
        while self._start_stage != "loading":  # the hub ends this generator when the spawn ends
            place = self.queue.place(self)
            if place is not None:
                message = (f"Waiting for a free start slot: you are {_ordinal(place)} in line "
                           f"({self.queue.slots} servers start at a time). Keep this page open.")
                if message != shown:
                    yield {"progress": 10, "message": message}
                    shown = message
            await asyncio.sleep(0.5)
        yield {"progress": 50, "message": "Your server is starting."}


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"
