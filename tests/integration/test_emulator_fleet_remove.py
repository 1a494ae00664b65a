"""An emulated vLLM's address handed to a new pod: the old one stops answering, the new one answers as itself.

The defect it closes: an emulator keyed by IP kept answering for a pod that had gone, so the pod that
got its IP next (kwok reuses them) seemed to serve from its first moment. Real: the emulator's HTTP
listeners on loopback, read with urllib as the gate's scraper reads them.
"""

import urllib.error
import urllib.request

from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
from tests.support.fleet import free_port


def _answer(host: str, port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as reply:
            return reply.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None


def test_a_removed_address_stops_answering_and_can_be_served_again() -> None:
    host, port = "127.0.0.1", free_port()
    old, new = EmulatedServer(engines=1), EmulatedServer(engines=1)
    new.feed(5.0, 500.0, 50.0, 1.0)  # what only the new server has served
    with Fleet([]) as fleet:
        fleet.add(host, port, old)
        assert _answer(host, port) == old.render()
        fleet.remove(host, port)
        assert _answer(host, port) is None, "the gone pod's vLLM still answered"
        fleet.add(host, port, new)
        assert _answer(host, port) == new.render() != old.render()
        fleet.remove("127.0.0.1", free_port())  # nothing listens there: nothing changes
        assert _answer(host, port) == new.render()


def test_removing_one_address_leaves_the_others() -> None:
    ports = [free_port() for _ in range(3)]
    servers = [EmulatedServer(engines=1) for _ in ports]
    with Fleet([("127.0.0.1", p, s) for p, s in zip(ports, servers)]) as fleet:
        fleet.remove("127.0.0.1", ports[1])
        assert [(_answer("127.0.0.1", p) is not None) for p in ports] == [True, False, True]
        assert [e[1] for e in fleet.servers] == [ports[0], ports[2]]
