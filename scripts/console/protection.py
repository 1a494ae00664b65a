"""What protects every request the console answers, set up once for the whole app, so a new endpoint inherits it.

Which library does what:
- Flask-WTF's `CSRFProtect`: every POST, PUT, PATCH and DELETE, sign-in and sign-out included, must
  carry the token of the browser's session (`csrf_token` form field or `X-CSRFToken` header); a
  request without it is refused (400) before its view runs. Its token lives in Flask's signed
  session cookie, signed with a random key of this process.
- Flask's `MAX_CONTENT_LENGTH` and `MAX_FORM_MEMORY_SIZE`: a body larger than `MAX_BODY_BYTES` is
  refused (413) from its Content-Length, before it is read.
- Flask's session cookie settings: HttpOnly, SameSite=Lax, and Secure whenever the request came
  over TLS (or always, with `secure_cookies`); the sign-in cookie is set alike, with SameSite=Strict.
- Flask-Limiter (in-memory storage): sign-in attempts per client address (`LOGIN_LIMIT`); one more is
  refused (429) without asking the API server. A token that fails its review on any other route (a
  Bearer header, the token cookie) counts against the same limit per address (`review_allowed`,
  `review_failed`), so guessing through a header is no way around it.
- The client address: the peer's, unless the operator says how many proxies in front of the console
  it trusts (OFFHOURS_CONSOLE_TRUSTED_PROXIES=N, werkzeug's ProxyFix with x_for=N); then the address
  that many X-Forwarded-For hops back, so people behind one ingress are not limited as one. Set it
  only behind that many proxies that each append the address they saw: otherwise a client chooses
  its own address and escapes the limit.
- Here: no answer of the console repeats the token of the request it answers (`scrub`), whatever
  an error message carried.
"""

import os
import secrets
from typing import Any

from flask import Flask, Response, render_template, request
from flask.sessions import SecureCookieSessionInterface
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_wtf.csrf import CSRFError, CSRFProtect
from limits import parse
from werkzeug.middleware.proxy_fix import ProxyFix

from offhours.scripts.names import CONSOLE_TOKEN_COOKIE

MAX_BODY_BYTES = 256 * 1024  # a request form with its parameters; a token is at most 16 KiB
LOGIN_LIMIT = "10 per minute"
CSRF_MESSAGE = "this form is not the console's (its CSRF token is missing or stale): reload the page"
HIDDEN = "[token hidden]"


class _TlsAwareSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, with the Secure flag on whenever the request came over TLS."""

    def get_cookie_secure(self, app: Flask) -> bool:  # noqa: D102 - Flask's hook
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def secure_cookie(app: Flask) -> bool:
    """Whether a cookie set now gets the Secure flag (TLS, or the console told to always set it)."""
    return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def request_tokens() -> list[str]:
    """Return the bearer tokens this request carries (header, cookie, sign-in form), longest first."""
    found = []
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        found.append(value.strip())
    found.append(request.cookies.get(CONSOLE_TOKEN_COOKIE, ""))
    if request.method == "POST" and (request.content_length or 0) <= MAX_BODY_BYTES:
        try:
            found.append(str(request.form.get("token", "")).strip())
        except Exception:  # noqa: BLE001 - a body that cannot be parsed carried no form token
            pass
    return sorted({t for t in found if len(t) >= 8}, key=len, reverse=True)


def scrub(answer: Response) -> Response:
    """Replace any token of the request in a text answer (an error repeating what it was given)."""
    if answer.direct_passthrough or not (answer.mimetype or "").startswith("text/"):
        return answer
    tokens = request_tokens()
    if not tokens:
        return answer
    body = answer.get_data(as_text=True)
    cleaned = body
    for token in tokens:
        cleaned = cleaned.replace(token, HIDDEN)
    if cleaned != body:
        answer.set_data(cleaned)
    return answer


def protect(app: Flask, secure_cookies: bool = False) -> Limiter:
    """Set up the protections above on `app`; return the limiter for the sign-in view to use."""
    app.config.update(
        SECRET_KEY=secrets.token_bytes(32),
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        MAX_FORM_MEMORY_SIZE=MAX_BODY_BYTES,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=secure_cookies,
        WTF_CSRF_FIELD_NAME="csrf_token",
    )
    app.session_interface = _TlsAwareSessions()
    CSRFProtect(app)
    proxies = os.environ.get("OFFHOURS_CONSOLE_TRUSTED_PROXIES", "").strip()
    if proxies.isdigit() and int(proxies) > 0:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=int(proxies))  # type: ignore[method-assign]
    limiter = Limiter(get_remote_address, app=app, storage_uri="memory://", default_limits=[])

    def refused(title: str, message: str, status: int) -> tuple[str, int]:
        return render_template("error.html", title=title, message=message, page=""), status

    @app.errorhandler(CSRFError)
    def csrf_refused(err: Any) -> tuple[str, int]:
        return refused("bad request", CSRF_MESSAGE, 400)

    @app.errorhandler(413)
    def too_large(err: Any) -> tuple[str, int]:
        return refused("too large", f"the request's body is larger than {MAX_BODY_BYTES // 1024} KiB; nothing "
                       "was read", 413)

    @app.errorhandler(429)
    def too_many(err: Any) -> tuple[str, int]:
        return refused("too many attempts", f"too many sign-in attempts from this address (at most {LOGIN_LIMIT}): "
                       "wait a minute", 429)

    app.after_request(scrub)
    return limiter


_FAILED_REVIEWS = parse(LOGIN_LIMIT)


def review_allowed(limiter: Limiter) -> bool:
    """Whether this request's address may have one more token reviewed (its failures are under LOGIN_LIMIT)."""
    return bool(limiter.limiter.test(_FAILED_REVIEWS, "failed-token-review", get_remote_address()))


def review_failed(limiter: Limiter) -> None:
    """Count a token that the API server did not accept against this request's address."""
    limiter.limiter.hit(_FAILED_REVIEWS, "failed-token-review", get_remote_address())
