"""The gate's metrics page is advisory: a port it cannot bind is one warning, and the gate goes on.

Fault: another process holds the port (pods sharing one network namespace, a second gate process). Invariant: the
gate never fails to start its loop because of its metrics page; the warning names the port.
"""

import io
import socket

from offhours.scripts.gate.log import Logger
from offhours.scripts.gate.loop import serve_metrics_or_warn


def test_a_taken_metrics_port_is_one_warning_and_the_gate_goes_on() -> None:
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))  # noqa: S104 - the same address the page binds
    holder.listen()
    port = holder.getsockname()[1]
    out = io.StringIO()
    try:
        assert serve_metrics_or_warn(lambda: "", port, Logger(out)) is False
    finally:
        holder.close()
    assert f"port {port}" in out.getvalue() and "not served" in out.getvalue()
