"""A real S3-compatible server on loopback: s3proxy (Maven Central) on its filesystem backend."""

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.fleet import free_port, wait_until_serving

S3PROXY_VERSION = "2.4.1"
S3PROXY_JAR = (Path.home() / ".m2" / "repository" / "org" / "gaul" / "s3proxy" / S3PROXY_VERSION
               / f"s3proxy-{S3PROXY_VERSION}-jar-with-dependencies.jar")
IDENTITY, CREDENTIAL = "offhours-test", "offhours-test-secret"


@contextmanager
def running_s3proxy(workdir: Path) -> Iterator[str]:
    """Start s3proxy on 127.0.0.1; yield its endpoint URL."""
    assert shutil.which("java"), "java is not installed"
    assert S3PROXY_JAR.exists(), f"{S3PROXY_JAR} missing: make deps fetches it from Maven Central"
    port = free_port()
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    props = workdir / "s3proxy.conf"
    props.write_text("\n".join([
        f"s3proxy.endpoint=http://127.0.0.1:{port}", "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={IDENTITY}", f"s3proxy.credential={CREDENTIAL}",
        "jclouds.provider=filesystem", f"jclouds.filesystem.basedir={workdir / 'data'}", ""]))
    log = (workdir / "s3proxy.log").open("w")
    proc = subprocess.Popen(["java", "-jar", str(S3PROXY_JAR), "--properties", str(props)], stdout=log,
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
