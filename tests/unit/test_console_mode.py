"""`offhours console` is never silently open in a cluster: the authentication mode it picks, and what it refuses."""

import pytest

from offhours.scripts.cli.console import KUBERNETES, LOCAL, auth_mode
from offhours.scripts.cli.main import main


@pytest.mark.parametrize(("requested", "host", "in_pod", "mode"), [
    (None, "127.0.0.1", False, LOCAL),  # an operator's laptop, as before
    (None, "localhost", False, LOCAL),
    (None, "::1", False, LOCAL),
    (None, "127.0.0.1", True, KUBERNETES),  # in a pod: authenticate even on loopback (a sidecar could read it)
    (None, "0.0.0.0", False, KUBERNETES),  # reachable from elsewhere: authenticate
    (KUBERNETES, "127.0.0.1", False, KUBERNETES),
    (LOCAL, "127.0.0.1", True, LOCAL),  # explicit
])
def test_the_mode(requested: str | None, host: str, in_pod: bool, mode: str) -> None:
    assert auth_mode(requested, host, in_pod) == mode


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.7", "::", "console.example"])
def test_local_mode_on_a_reachable_address_is_one_line_and_exit_2(host: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: an operator asks for an unauthenticated console on an address others can reach."""
    assert main(["console", "--auth", "local", "--host", host]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("console: --auth local serves without authentication")


@pytest.mark.parametrize(("args", "what"), [(["--port", "70000"], "--port 70000"), (["--port", "0"], "--port 0"),
                                            (["--interval", "0"], "--interval 0"),
                                            (["--interval", "nan"], "--interval nan"),
                                            (["--interval", "1e300"], "--interval 1e+300")])
def test_out_of_range_ports_and_intervals_are_one_line(args: list[str], what: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["console", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"console: {what}:"), err
