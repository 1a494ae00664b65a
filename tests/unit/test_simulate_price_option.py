"""`simulate --price` is a GPU-hour price: a finite number of 0 or more, as the fleet file's gpuHourPrice.

`--price nan` printed a saving of nan and `--price -5` a negative saving of hundreds of thousands,
both as a result (exit 0).
"""

import pytest

from offhours.scripts.cli.main import main


@pytest.mark.parametrize("price", ["nan", "-5", "inf", "-inf", "two"])
def test_a_price_that_is_no_price_is_refused(price: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", f"--price={price}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--price" in err and repr(price) in err, err
