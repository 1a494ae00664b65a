"""Option values the command line parses itself (argparse types): one reading of "a finite number of 0 or more"."""

import argparse
import math


def finite_non_negative(text: str, what: str) -> float:
    """Parse a finite number of 0 or more; `what` names it in the error (e.g. "a number of seconds")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    # NaN compares false with every bound and inf never ends: neither is a length, a price or a rate.
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} (a finite number of 0 or more)")
    return value
