"""Fixtures the server tests share: a real s3proxy with the bucket `lab`, one per test module."""

from collections.abc import Iterator

import pytest

from tests.support.s3_fixture import s3proxy_with_bucket, with_credentials


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The proxy's environment (endpoint and credentials), started on first use in a module."""
    with s3proxy_with_bucket(tmp_path_factory.mktemp("s3proxy")) as env:
        yield env


@pytest.fixture
def s3_creds(s3: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The proxy's credentials in this test's environment, as a job's pod has them."""
    return with_credentials(s3, monkeypatch)
