"""A larger rise on the fitting days never leads the tuner to a leaner headroom than a smaller rise does.

When no setting's headroom covers `RISE_MARGIN` times the fitting days' largest rise (above +67%, with
headrooms up to 1.0) and no setting with the volatility term keeps the budget, `choose` dropped the rise
margin altogether and took the most lending setting: a +82% rise (m-small's fitting days hold one)
chose the headroom 0.5 where a +57% rise chose 1.0.
"""

from offhours.scripts.simulate.tune import choose

from .test_tune import _cand


def test_a_rise_no_headroom_covers_still_gets_the_widest_headroom_that_keeps_the_budget() -> None:
    """Fault: with nothing covering the rise margin, the margin was dropped and the leanest headroom chosen."""
    lean = _cand(0.5, 0.60, 0, margin=0, look="none")
    middle = _cand(0.85, 0.40, 0, margin=0, look="trend")
    wide = _cand(1.0, 0.30, 0, margin=0, look="none")
    late = _cand(1.0, 0.35, 0, margin=3, look="none")  # only within the budget at the normal cold start
    assert choose([lean, middle, wide, late], 0, fit_rise=0.57) == (wide, True)  # 1.0 >= 1.5 x 57%
    assert choose([lean, middle, wide, late], 0, fit_rise=0.82) == (wide, True)  # none covers 123%: the closest
    assert choose([lean, middle, late], 0, fit_rise=0.82) == (middle, True)  # the widest that keeps both margins
    assert choose([lean], 0, fit_rise=0.9) == (lean, True)  # the only one: the budget decides
