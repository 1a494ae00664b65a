"""Stop a tick loop on SIGTERM the way Kubernetes controllers release their lock on shutdown.

A SIGTERM between ticks ends the loop at once: no Lease is held then. A SIGTERM during a tick is
remembered and the loop ends after it, so the tick finishes its writes and gives the Lease back
instead of leaving it held until the grant expires (another gate or an exit hook would wait).
"""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class StopRequested(SystemExit):
    """A SIGTERM between ticks: ends the loop at once (exit code 0); the loop that owns it may catch it and return."""

    def __init__(self) -> None:
        super().__init__(0)


class GracefulStop:
    """SIGTERM handling for a loop of ticks: `requested` once a SIGTERM came; ticks run inside `tick()`."""

    def __init__(self) -> None:
        self.requested = False
        self._in_tick = False

    @contextmanager
    def installed(self) -> Iterator["GracefulStop"]:
        """Handle SIGTERM inside the block (in the main thread; elsewhere signals cannot be handled)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            yield self
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if not self._in_tick:
            raise StopRequested()

    @contextmanager
    def tick(self) -> Iterator[None]:
        """Run the body as one tick: a SIGTERM meanwhile waits for it to end."""
        self._in_tick = True
        try:
            yield
        finally:
            self._in_tick = False
