"""An access review's answer is a permission only when it says `allowed: true` as the API server writes it: any
other shape (a proxy's page, a string, a number, a status that is no object) is no permission and no traceback."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cluster.access import READ_JOBS, PersonAccess, SelfAccess, Subject

JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                    max_size=3), max_leaves=8)
ANSWERS = st.one_of(JSONISH, st.fixed_dictionaries({"status": JSONISH}),
                    st.fixed_dictionaries({"status": st.fixed_dictionaries({"allowed": JSONISH})}))


class Api:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        return self.answer


@given(ANSWERS)
def test_only_allowed_true_is_a_permission(answer: Any) -> None:
    expected = isinstance(answer, dict) and isinstance(answer.get("status"), dict) \
        and answer["status"].get("allowed") is True
    for access in (SelfAccess(Api(answer)), PersonAccess(Api(answer), Subject("alice"))):
        assert access.may("research", READ_JOBS) is expected


@given(ANSWERS)
def test_a_token_review_of_any_shape_is_a_subject_only_when_authenticated_is_true(answer: Any) -> None:
    from offhours.scripts.cluster.access import self_review, token_review

    subject = token_review(Api(answer), "t")
    status = answer.get("status") if isinstance(answer, dict) else None
    if subject is not None:
        assert isinstance(status, dict) and status.get("authenticated") is True
    assert isinstance(self_review(Api(answer)), str)


@given(JSONISH, JSONISH, JSONISH)
def test_an_authenticated_review_of_any_user_shape_is_read_without_error(name: Any, groups: Any, extra: Any) -> None:
    from offhours.scripts.cluster.access import token_review

    answer = {"status": {"authenticated": True, "user": {"username": name, "groups": groups, "extra": extra}}}
    subject = token_review(Api(answer), "t")
    assert subject is not None and all(isinstance(g, str) for g in subject.groups)
    assert all(isinstance(v, tuple) for v in subject.extra.values())
