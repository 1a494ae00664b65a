"""What a signed-in reader without rights sees: nothing of anyone's jobs, not even in the problems listed."""

import pytest

from offhours.scripts.console.app import create_app
from offhours.scripts.console.auth import Access
from offhours.scripts.console.source import PoolSource
from offhours.scripts.names import CONSOLE_TOKEN_COOKIE
from tests.support.access import may_all
from tests.support.console_forms import csrf_token
from tests.support.tenant_pool import Reader, pool_of, running


class Grants:
    """An authenticator that answers one fixed Access for any token."""

    def __init__(self, access: Access) -> None:
        self.granted = access

    def access(self, token: str) -> Access | None:
        return self.granted


def malformed(name: str) -> dict:
    """A workflow with the offhours service label whose status cannot be read (skipped and named in the pool)."""
    wf = running({})
    wf["metadata"]["name"] = name
    wf["spec"] = ["x"]
    return wf


def test_a_token_without_rights_on_workflows_is_not_shown_the_names_of_skipped_ones():
    """Fault: a malformed tenant workflow is named in the pool's problems, shown to a reader who may not list workflows."""
    pool = pool_of(running({}), malformed("secret-merger-eval"))
    assert any("secret-merger-eval" in p for p in pool.problems)  # the fixture does produce a skipped workflow
    nobody = Access(user="system:serviceaccount:web:viewer", services=True, jobs=False, metrics=False)
    client = create_app(PoolSource(Reader(pool), interval=0), auth=Grants(nobody)).test_client()
    for path in ("/", "/queue", "/usage"):
        page = client.get(path, headers={"Authorization": "Bearer t"}).get_data(as_text=True)
        assert "secret-merger-eval" not in page, path
        assert "train" not in page, path


def test_a_token_with_rights_on_workflows_still_sees_the_skipped_ones_named():
    """The skipped workflow stays named for a reader who may list workflows (a malformed one is never silent)."""
    pool = pool_of(running({}), malformed("secret-merger-eval"))
    reader = Access(user="alice", services=True, jobs=True, metrics=True, reviewer=may_all("alice"))
    client = create_app(PoolSource(Reader(pool), interval=0), auth=Grants(reader)).test_client()
    page = client.get("/queue", headers={"Authorization": "Bearer t"}).get_data(as_text=True)
    assert "secret-merger-eval" in page


class Unreachable:
    """An authenticator whose API server cannot answer (down, or the console's own rights revoked)."""

    def access(self, token: str) -> Access | None:
        from offhours.scripts.console.auth import ReviewUnavailable

        raise ReviewUnavailable("cannot review the token: MaxRetryError")


@pytest.mark.parametrize("auth", [Grants(None), Unreachable()], ids=["token refused", "API server down"])
def test_logout_clears_the_token_cookie_whatever_the_api_server_says(auth) -> None:
    """Fault: /logout sat behind the token check, so a revoked token or a down API server kept the cookie (401/503)."""
    client = create_app(PoolSource(Reader(pool_of(running({}))), interval=0), auth=auth).test_client()
    client.set_cookie(CONSOLE_TOKEN_COOKIE, "a-token")
    answer = client.post("/logout", data={"csrf_token": csrf_token(client.get("/login").get_data(as_text=True))})
    assert answer.status_code == 302
    assert any(CONSOLE_TOKEN_COOKIE in h and "Expires=Thu, 01 Jan 1970" in h for h in answer.headers.getlist("Set-Cookie"))
