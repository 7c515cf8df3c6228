"""What the device plugin and the DRA driver do alike as daemons: periodic steps on threads
that never die of an error, and running until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

log = logging.getLogger(__name__)

Step = Callable[[], Any]


def start_loops(stop: threading.Event, loops: Iterable[tuple[float, Step]]
                ) -> list[threading.Thread]:
    """One daemon thread per (interval s, step): the step, then a wait, until `stop` is set;
    a step's exception is logged and the loop goes on."""

    def loop(every: float, step: Step) -> None:
        while not stop.is_set():
            try:
                step()
            except Exception:                       # a loop of the daemon never dies
                log.exception("unexpected error")
            stop.wait(every)

    threads = []
    for every, step in loops:
        t = threading.Thread(target=loop, args=(every, step), daemon=True)
        t.start()
        threads.append(t)
    return threads


class Service(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


def serve_until_signalled(service: Service) -> None:
    """Start the service, wait for SIGTERM or SIGINT, stop it."""
    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    service.start()
    done.wait()
    service.stop()
