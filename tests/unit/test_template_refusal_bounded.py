"""A template refusal names every missing part up to a bound, then how many more: a tenant's template with
thousands of malformed parameters gives one line of bounded length, not thousands of clauses."""

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cluster.template_needs import template_problems, template_refusal


@given(st.integers(0, 3000))
def test_the_refusal_is_one_bounded_line(count: int) -> None:
    template = {"metadata": {"name": "t"}, "spec": {"arguments": {"parameters": [{"value": 1}] * count}}}
    line = template_refusal(template)
    assert line is not None and "\n" not in line and len(line) < 4000
    problems = template_problems(template)
    if len(problems) > 20:
        assert f"and {len(problems) - 20} more" in line
