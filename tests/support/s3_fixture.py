"""A real S3-compatible server on loopback: s3proxy (Maven Central) on its filesystem backend.

4.0.0 by default: it honours conditional puts (`If-None-Match: *` resolved as it writes), which the
checkpoint store's fence needs. 2.4.1 ignores them (measured by tests/integration/test_checkpoint_crash.py),
so the store must refuse it.
"""

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.fleet import free_port, wait_until_serving

S3PROXY_VERSION = "4.0.0"
IGNORES_CONDITIONAL_PUTS = "2.4.1"


def s3proxy_jar(version: str = S3PROXY_VERSION) -> Path:
    """Where `mvn dependency:get` (make deps) puts the s3proxy jar of `version`."""
    return (Path.home() / ".m2" / "repository" / "org" / "gaul" / "s3proxy" / version
            / f"s3proxy-{version}-jar-with-dependencies.jar")


S3PROXY_JAR = s3proxy_jar()
IDENTITY, CREDENTIAL = "offhours-test", "offhours-test-secret"


@contextmanager
def running_s3proxy(workdir: Path, version: str = S3PROXY_VERSION) -> Iterator[str]:
    """Start s3proxy `version` on 127.0.0.1; yield its endpoint URL."""
    assert shutil.which("java"), "java is not installed"
    jar = s3proxy_jar(version)
    assert jar.exists(), f"{jar} missing: make deps fetches it from Maven Central"
    port = free_port()
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    props = workdir / "s3proxy.conf"
    props.write_text("\n".join([
        f"s3proxy.endpoint=http://127.0.0.1:{port}", "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={IDENTITY}", f"s3proxy.credential={CREDENTIAL}",
        "jclouds.provider=filesystem", f"jclouds.filesystem.basedir={workdir / 'data'}", ""]))
    log = (workdir / "s3proxy.log").open("w")
    proc = subprocess.Popen(["java", "-jar", str(jar), "--properties", str(props)], stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, url, workdir / "s3proxy.log", "s3proxy", 90)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def s3_env(endpoint: str) -> dict[str, str]:
    return {**os.environ, "AWS_ACCESS_KEY_ID": IDENTITY, "AWS_SECRET_ACCESS_KEY": CREDENTIAL,
            "AWS_DEFAULT_REGION": "us-east-1", "OFFHOURS_S3_ENDPOINT_URL": endpoint}


def s3_client(env: dict[str, str]) -> Any:
    """A boto3 client of the server `env` names (s3_env), checksums only where S3 requires them (as the store's)."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=env["OFFHOURS_S3_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                        config=Config(request_checksum_calculation="when_required",
                                      response_checksum_validation="when_required"))


@contextmanager
def s3proxy_with_bucket(workdir: Path, bucket: str = "lab") -> Iterator[dict[str, str]]:
    """Start s3proxy, make `bucket`; yield the environment that reaches it (s3_env): every S3 test's module fixture."""
    with running_s3proxy(workdir) as endpoint:
        env = s3_env(endpoint)
        s3_client(env).create_bucket(Bucket=bucket)
        yield env


def with_credentials(env: dict[str, str], monkeypatch: Any) -> dict[str, str]:
    """Put the proxy's credentials in this test's environment (as a job's pod has them); return `env`."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(key, env[key])
    return env
