"""The console's authentication when the API server cannot answer, and what it refuses before asking it.

Real: a Kubernetes client pointed at a loopback port where nothing listens (the API server down).
The API server's own answers (TokenReview, SubjectAccessReview) are tested end to end in
tests/e2e/test_console_auth_e2e.py.
"""

import pytest
from kubernetes import client

from offhours.scripts.console.app import create_app
from offhours.scripts.console.auth import MAX_TOKEN_BYTES, KubernetesAuth
from offhours.scripts.console.source import PoolSource
from tests.support.console_forms import csrf_token
from tests.support.fleet import free_port
from tests.support.tenant_pool import Reader, pool_of, running


def dead_api() -> client.ApiClient:
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{free_port()}"
    return client.ApiClient(config)


@pytest.fixture
def app():
    auth = KubernetesAuth(dead_api(), "serving", "research", timeout=2)
    return create_app(PoolSource(Reader(pool_of(running({}))), interval=0), auth=auth).test_client()


def test_without_a_token_every_page_is_401_and_shows_no_job(app) -> None:
    for path in ("/", "/queue", "/usage", "/jobs/train", "/metrics"):
        answer = app.get(path)
        assert answer.status_code == 401, path
        assert answer.headers["WWW-Authenticate"].startswith("Bearer ")
        assert "train" not in answer.get_data(as_text=True), path
    assert app.get("/healthz").get_data(as_text=True) == "ok"


def test_an_api_server_that_cannot_review_a_token_is_503_never_an_open_door(app) -> None:
    """Fault: the API server is down while a reader brings a token; nothing of the pool is shown."""
    answer = app.get("/queue", headers={"Authorization": "Bearer some-token"})
    assert answer.status_code == 503
    page = answer.get_data(as_text=True)
    assert "train" not in page and "cannot review the token" in page
    csrf = csrf_token(app.get("/login").get_data(as_text=True))
    assert app.post("/login", data={"token": "some-token", "csrf_token": csrf}).status_code == 503


@pytest.mark.parametrize("token", ["x" * (MAX_TOKEN_BYTES + 1), "", "   "])
def test_an_absurd_token_is_refused_without_asking_the_api_server(app, token: str) -> None:
    """Fault: a hostile client sends an enormous or empty token (the dead API server would make a call a 503)."""
    assert app.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    csrf = csrf_token(app.get("/login").get_data(as_text=True))
    assert app.post("/login", data={"token": token, "csrf_token": csrf}).status_code == 401
    app.set_cookie("offhours-console-token", token[:4000])
    assert app.get("/").status_code in (401, 503)


def test_local_mode_needs_no_token() -> None:
    local = create_app(PoolSource(Reader(pool_of(running({}))), interval=0)).test_client()
    assert local.get("/queue").status_code == 200 and "train" in local.get("/queue").get_data(as_text=True)
    assert local.get("/login").status_code == 302
