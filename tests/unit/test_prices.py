"""Local prices: a price per GPU type or for the rest, plus electricity at a
kWh price times each GPU's power (said, else measured, else a default)."""

import pytest

from gqa.models.errors import SpecError
from gqa.models.prices import price_rules


@pytest.mark.parametrize("prices, kwh, watts, gpu, limit, hourly, source", [
    ([], None, [], "a10g", None, 0.0, ""),                                     # nothing said: free
    (["0.5"], None, [], "a10g", None, 0.5, ""),                                # one price for all
    (["a10g=1.10", "0.5"], None, [], "a10g", None, 1.10, ""),                  # its type's price
    (["a10g=1.10", "0.5"], None, [], "h100", None, 0.5, ""),                   # the rest's
    (["A10G=1.10"], None, [], "t4", None, 0.0, ""),                            # another type, no rest: 0
    (["0.5"], 0.30, [], "a10g", 250.0, 0.5 + 0.30 * 0.25, "power limit"),      # measured power
    ([], 0.30, [], "h100", None, 0.30 * 0.7, "default for h100"),             # the table
    ([], 0.30, [], "virtual", None, 0.30 * 0.3, "default"),                    # 300 W
    ([], 0.30, ["a10g=150"], "a10g", 300.0, 0.30 * 0.15, "--watts"),           # said beats measured
    ([], 0.30, ["200"], "h100", 700.0, 0.30 * 0.2, "--watts"),
    ([], 0.30, ["a10g=150", "200"], "a10g", None, 0.30 * 0.15, "--watts"),     # the type's before the rest's
])
def test_a_gpus_price(prices, kwh, watts, gpu, limit, hourly, source):
    price = price_rules(prices, kwh, watts).price(gpu, limit)
    assert price.hourly == pytest.approx(hourly)
    assert price.watts_from == source


def test_the_price_explains_itself():
    rules = price_rules(["a10g=1.10"], 0.30, [])
    assert rules.price("a10g", 300.0).explain(0.30) == "$1.1 + $0.3/kWh x 300 W (power limit) = $1.19"
    assert price_rules(["2"]).price("x").explain(0) == "$2"
    assert price_rules().empty and not price_rules(["1"]).empty and not price_rules(kwh=0.0).empty


@pytest.mark.parametrize("prices, kwh, watts, message", [
    (["abc"], None, [], "--price 'abc': use a number"),
    (["=1"], None, [], "a GPU type goes before"),
    (["-1"], None, [], "must be a number >= 0"),
    (["a10g=nan"], None, [], "must be a number >= 0"),
    (["1", "2"], None, [], "given twice for the rest"),
    (["a10g=1", "A10G=2"], None, [], "given twice for a10g"),
    ([], -0.1, [], "--kwh-price must be a price >= 0, got -0.1"),
    ([], float("nan"), [], "--kwh-price must be a price >= 0, got nan"),
    ([], float("inf"), [], "--kwh-price must be a price >= 0, got inf"),
    ([], 0.3, ["nan"], "must be a number"),
    ([], 0.3, ["0"], "--watts must be more than 0"),
    ([], None, ["300"], "--watts counts only with --kwh-price"),
])
def test_bad_options_are_one_line_naming_the_option(prices, kwh, watts, message):
    with pytest.raises(SpecError, match=message):
        price_rules(prices, kwh, watts)
