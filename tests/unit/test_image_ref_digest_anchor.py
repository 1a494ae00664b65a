"""A reference is by digest only when it ends with the digest: a trailing newline (which `$` lets through) is not."""

from offhours.scripts.policy.image_refs import by_digest, mutable_tag_warning
from offhours.scripts.runtime.provenance import reported_digest

DIGEST = "sha256:" + "a" * 64


def test_a_digest_followed_by_a_newline_is_no_digest() -> None:
    assert by_digest(f"r/x@{DIGEST}") and not by_digest(f"r/x@{DIGEST}\n")
    assert mutable_tag_warning("image", f"r/x@{DIGEST}\n") is not None
    assert reported_digest(f"r/x@{DIGEST}") == DIGEST and reported_digest(f"r/x@{DIGEST}\n") is None
