"""SIGTERM and the gate's tick loop: a tick in progress finishes (and gives the Lease back); between ticks the loop ends."""

import os
import signal

import pytest

from offhours.scripts.gate.shutdown import GracefulStop


def test_a_sigterm_during_a_tick_lets_the_tick_finish_and_is_remembered() -> None:
    finished = False
    with GracefulStop().installed() as stop:
        with stop.tick():
            os.kill(os.getpid(), signal.SIGTERM)  # delivered here, in the middle of the tick
            finished = True
        assert stop.requested
    assert finished


def test_a_sigterm_between_ticks_ends_the_loop_at_once() -> None:
    with GracefulStop().installed() as stop:
        with stop.tick():
            pass
        with pytest.raises(SystemExit) as exit_info:
            os.kill(os.getpid(), signal.SIGTERM)
        assert exit_info.value.code == 0 and stop.requested


def test_the_previous_handler_is_back_after_the_loop() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with GracefulStop().installed():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
