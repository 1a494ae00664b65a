"""The console's protections, tried with a plain HTTP client that skips the browser (Flask's test client).

The invariants, in words:
- Every route that takes a state-changing method (found in the app's URL map, so a new endpoint is
  covered the day it is added) refuses a request without the session's CSRF token, before its view
  runs: nothing is created, stopped or signed in.
- A body over the bound is refused from its Content-Length (413), never read.
- Cookies carry HttpOnly and SameSite, and Secure whenever the request came over TLS.
- Sign-in attempts per address are bounded: past the limit, 429 without asking the API server.
- No answer repeats the token of the request it answers, whatever an error message carried.
"""

from typing import Any

import pytest

from offhours.scripts.console.app import create_app
from offhours.scripts.console.auth import Access, ReviewUnavailable
from offhours.scripts.console.protection import LOGIN_LIMIT, MAX_BODY_BYTES
from offhours.scripts.console.source import PoolSource
from offhours.scripts.names import CONSOLE_TOKEN_COOKIE
from tests.support.access import may_all
from tests.support.console_forms import csrf_token
from tests.support.pool_fixture import workflow
from tests.support.tenant_pool import Reader, pool_of
from tests.unit.test_console_request_review import GOOD, FakePersonApi, fields

TOKEN = "eyJhbGciOiJSUzI1NiJ9.a-long-service-account-token.signature"
STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}


class Counting:
    """Every token is its own user with every right; counts the reviews (each would be an API call)."""

    def __init__(self) -> None:
        self.reviews = 0

    def access(self, token: str) -> Access | None:
        self.reviews += 1
        return Access(user=f"user-{token[:4]}", services=True, jobs=True, metrics=True,
                      reviewer=may_all(f"user-{token[:4]}"))


class Leaky:
    """An API server whose error repeats the token it was asked about (as some proxies' messages do)."""

    def access(self, token: str) -> Access | None:
        raise ReviewUnavailable(f"cannot review the token {token}: 502 from the proxy")


def console(auth: Any = None, api: FakePersonApi | None = None) -> Any:
    live = workflow("train-1", "chat", 1, "admitted", "Running", created=30, started=20, run_id="run-1")
    api = api or FakePersonApi()
    api.workflows["train-1"] = live
    return create_app(PoolSource(Reader(pool_of(live)), interval=0), services=["chat"], auth=auth, person_api=api,
                      local_user="operator")


def concrete(rule: Any) -> str:
    """A URL of `rule` with every variable filled in."""
    return rule.rule.replace("<name>", "train-1").replace("<path:filename>", "x")


@pytest.mark.parametrize("auth", [None, Counting()], ids=["local", "bearer token"])
def test_every_state_changing_route_refuses_a_post_without_the_csrf_token(auth: Any) -> None:
    """Fault: a page of another site posting a form into the console (a request, a cancel, a sign-in, a sign-out)."""
    api = FakePersonApi()
    app = console(auth, api)
    client = app.test_client()
    headers = {"Authorization": f"Bearer {TOKEN}"} if auth else {}
    routes = [r for r in app.url_map.iter_rules() if r.methods and r.methods & STATE_CHANGING]
    assert {r.rule for r in routes} >= {"/login", "/logout", "/request/<name>", "/jobs/<name>/cancel",
                                        "/jobs/<name>/resubmit"}
    for rule in routes:
        for method in sorted(rule.methods & STATE_CHANGING):
            for data in ({**fields(GOOD), "token": TOKEN, "action": "submit"},
                         {**fields(GOOD), "csrf_token": "forged", "action": "submit"}):
                answer = client.open(concrete(rule), method=method, data=data, headers=headers)
                assert answer.status_code == 400, (rule.rule, method, answer.status_code)
                assert "CSRF token is missing or stale" in answer.get_data(as_text=True)
                assert CONSOLE_TOKEN_COOKIE not in answer.headers.get("Set-Cookie", "")
    assert api.created == [] and api.stopped == []
    if auth is not None:
        assert auth.reviews <= len(routes) * 2 * 2  # a review per request at most, none for the forged sign-ins
    page = client.get("/jobs/train-1", headers=headers).get_data(as_text=True)
    answer = client.post("/jobs/train-1/cancel", headers=headers,
                         data={"form-key": page.split('name="form-key" value="')[1].split('"')[0],
                               "csrf_token": csrf_token(page)})
    assert answer.status_code in (302, 303) and len(api.stopped) == 1  # with the token, the same post is taken


@pytest.mark.parametrize("path", ["/login", "/request/offhours-job", "/jobs/train-1/cancel"])
def test_a_body_over_the_bound_is_refused_before_it_is_read(path: str) -> None:
    """Fault: a client posting a huge form (or claiming to) to make the console read and parse it."""
    client = console(Counting()).test_client()
    csrf = csrf_token(client.get("/login").get_data(as_text=True))
    body = b"csrf_token=" + csrf.encode() + b"&token=" + b"x" * MAX_BODY_BYTES
    answer = client.post(path, data=body, content_type="application/x-www-form-urlencoded",
                         headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 413
    assert "larger than 256 KiB; nothing was read" in answer.get_data(as_text=True)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_cookies_carry_the_flags_browsers_expect(scheme: str) -> None:
    """Fault: a sign-in cookie readable by scripts, sent cross-site, or sent in clear over a TLS console's link."""
    client = console(Counting()).test_client()
    base = f"{scheme}://console.example"
    csrf = csrf_token(client.get("/login", base_url=base).get_data(as_text=True))
    answer = client.post("/login", base_url=base, data={"token": TOKEN, "csrf_token": csrf},
                         headers={"Referer": f"{base}/login"})
    assert answer.status_code == 302
    cookies = {h.split("=", 1)[0]: h for h in answer.headers.getlist("Set-Cookie")}
    token_cookie = cookies[CONSOLE_TOKEN_COOKIE]
    assert "HttpOnly" in token_cookie and "SameSite=Strict" in token_cookie
    assert ("Secure" in token_cookie) == (scheme == "https")
    fresh = console(Counting()).test_client()
    session = [h for h in fresh.get("/login", base_url=base).headers.getlist("Set-Cookie") if h.startswith("session=")]
    assert session and "HttpOnly" in session[0] and "SameSite=Lax" in session[0]
    assert ("Secure" in session[0]) == (scheme == "https")
    behind_a_proxy = create_app(PoolSource(Reader(pool_of()), interval=0), auth=Counting(), secure_cookies=True)
    plain = behind_a_proxy.test_client().get("/login").headers.getlist("Set-Cookie")
    assert plain and all("Secure" in h for h in plain)  # TLS ends at the proxy: Secure all the same


def test_sign_in_attempts_per_address_are_limited() -> None:
    """Fault: a script trying tokens as fast as the console answers (each try an API call)."""
    auth = Counting()
    client = console(auth).test_client()
    limit = int(LOGIN_LIMIT.split()[0])
    csrf = csrf_token(client.get("/login").get_data(as_text=True))
    codes = [client.post("/login", data={"token": f"{TOKEN}-{i}", "csrf_token": csrf}).status_code
             for i in range(limit + 3)]
    assert codes[:limit] == [302] * limit and codes[limit:] == [429] * 3
    assert auth.reviews == limit  # the refused tries never reached the API server
    other = client.post("/login", data={"token": TOKEN, "csrf_token": csrf},
                        environ_base={"REMOTE_ADDR": "192.0.2.9"})
    assert other.status_code == 302  # another address is not held back by this one's tries
    assert client.get("/login").status_code == 200  # the page itself is never limited


@pytest.mark.parametrize("where", ["header", "cookie", "sign-in form"])
def test_no_answer_repeats_the_requests_token(where: str) -> None:
    """Fault: an error message carrying the token it was about, shown back on the page (and in proxy logs)."""
    client = console(Leaky()).test_client()
    if where == "sign-in form":
        csrf = csrf_token(client.get("/login").get_data(as_text=True))
        answer = client.post("/login", data={"token": TOKEN, "csrf_token": csrf})
    elif where == "header":
        answer = client.get("/queue", headers={"Authorization": f"Bearer {TOKEN}"})
    else:
        client.set_cookie(CONSOLE_TOKEN_COOKIE, TOKEN)
        answer = client.get("/queue")
    page = answer.get_data(as_text=True)
    assert answer.status_code == 503 and "502 from the proxy" in page
    assert TOKEN not in page and "[token hidden]" in page
    local = console(Counting()).test_client()
    missing = local.get(f"/jobs/{TOKEN}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert missing.status_code == 404 and TOKEN not in missing.get_data(as_text=True)


class Refusing(Counting):
    """An API server that accepts no token (every guess is wrong); counts the reviews."""

    def access(self, token: str) -> Access | None:
        self.reviews += 1
        return None


def test_token_guesses_through_a_header_or_cookie_are_limited_like_sign_in() -> None:
    """Closes the class "a way to present a token that the sign-in limit does not watch".

    Before, only POST /login was limited: a Bearer header or the token cookie on any route was
    reviewed by the API server as often as it was sent.
    """
    auth = Refusing()
    client = console(auth).test_client()
    statuses = [client.get("/", headers={"Authorization": f"Bearer guess-{i:06d}-xxxxxxxx"}).status_code
                for i in range(30)]
    assert 429 in statuses and auth.reviews <= 10, (auth.reviews, sorted(set(statuses)))
    other = Refusing()
    client = console(other).test_client()
    for i in range(30):
        client.set_cookie(CONSOLE_TOKEN_COOKIE, f"guess-{i:06d}-xxxxxxxx")
        client.get("/queue")
    assert other.reviews <= 10, other.reviews


def test_behind_trusted_proxies_one_guesser_does_not_lock_out_another_person(monkeypatch: pytest.MonkeyPatch) -> None:
    """Closes the class "everyone behind one ingress shares one address's limit" (an operator opt-in)."""
    monkeypatch.setenv("OFFHOURS_CONSOLE_TRUSTED_PROXIES", "1")
    app = console(Counting())
    attacker, victim = app.test_client(), app.test_client()
    for i in range(11):
        form = {"token": f"guess-{i:06d}-xxxxxxxx", "csrf_token": csrf_token(attacker.get("/login").get_data(as_text=True))}
        attacker.post("/login", data=form, environ_base={"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"})
    form = {"token": "the-victims-real-token", "csrf_token": csrf_token(victim.get("/login").get_data(as_text=True))}
    answer = victim.post("/login", data=form,
                         environ_base={"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.7"})
    assert answer.status_code != 429
