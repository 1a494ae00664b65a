"""The hidden fields a console form carries, read from its page as a browser would post them back."""

import re


def csrf_token(page: str) -> str:
    """Return the CSRF token (Flask-WTF) a page of the console carries."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def hidden(page: str) -> dict[str, str]:
    """Return the form key and CSRF token of a console form's page, as its form posts them."""
    found = re.search(r'name="form-key" value="([^"]+)"', page)
    assert found, "the page carries no form key"
    return {"form-key": found.group(1), "csrf_token": csrf_token(page)}
