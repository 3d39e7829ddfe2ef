"""What a GPU-hour costs on the local backend, from `gqa local start` and
`gqa local price` options:

    --price a10g=1.10 --price 0.5     a price per GPU-hour for a type, and for the rest
    --kwh-price 0.30                  electricity for owned GPUs, per kWh ...
    --watts a10g=250 --watts 300      ... times each GPU's power

A GPU's price is its type's price (else the rest's, else 0) plus, with a kWh
price, that price times its power in kW. Its power is the --watts given for
its type, else the --watts for the rest, else its power limit as NVML reads
it, else a stated default for its type (DEFAULT_WATTS), else 300 W: what
is said beats what is measured, and what is measured beats a table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import SpecError

# board power of common data-centre GPUs, in watts (their makers' figures); a power limit read from the GPU wins
DEFAULT_WATTS: dict[str, float] = {
    "h200": 700, "h100": 700, "a100": 400, "a10g": 300, "a10": 150, "l40s": 350, "l40": 300, "l4": 72,
    "t4": 70, "v100": 300, "a6000": 300, "rtx": 300,
}
FALLBACK_WATTS = 300.0


@dataclass(frozen=True)
class GpuPrice:
    """One GPU's price per hour, and how it came about."""

    rent: float                  # the --price part
    energy: float                # the --kwh-price part (0 without one)
    watts: float | None          # the power the energy part counts; None without a kWh price
    watts_from: str              # "--watts", "power limit", "default for a10g", "default"

    @property
    def hourly(self) -> float:
        return self.rent + self.energy

    def explain(self, kwh: float) -> str:
        """`$1.10 + $0.30/kWh x 300 W (power limit) = $1.19`"""
        if self.watts is None:
            return f"${self.rent:,.4g}"
        return (f"${self.rent:,.4g} + ${kwh:,.4g}/kWh x {self.watts:g} W ({self.watts_from}) "
                f"= ${self.hourly:,.4g}")


@dataclass(frozen=True)
class PriceRules:
    per_type: Mapping[str, float] = field(default_factory=dict)
    rest: float | None = None
    kwh: float | None = None
    watts_per_type: Mapping[str, float] = field(default_factory=dict)
    watts_rest: float | None = None

    @property
    def empty(self) -> bool:
        return not self.per_type and self.rest is None and self.kwh is None

    def price(self, gpu_type: str, power_limit: float | None = None) -> GpuPrice:
        rent = self.per_type.get(gpu_type, self.rest if self.rest is not None else 0.0)
        if not self.kwh:
            return GpuPrice(rent, 0.0, None, "")
        watts, source = self._watts(gpu_type, power_limit)
        return GpuPrice(rent, self.kwh * watts / 1000.0, watts, source)

    def _watts(self, gpu_type: str, power_limit: float | None) -> tuple[float, str]:
        if gpu_type in self.watts_per_type:
            return self.watts_per_type[gpu_type], "--watts"
        if self.watts_rest is not None:
            return self.watts_rest, "--watts"
        if power_limit:
            return power_limit, "power limit"
        if gpu_type in DEFAULT_WATTS:
            return DEFAULT_WATTS[gpu_type], f"default for {gpu_type}"
        return FALLBACK_WATTS, "default"


def price_rules(prices: Iterable[str] = (), kwh: float | None = None, watts: Iterable[str] = ()) -> PriceRules:
    """The rules the options say; SpecError (one line, the option named) for a bad value."""
    per_type, rest = _per_type("--price", prices)
    watts_per_type, watts_rest = _per_type("--watts", watts)
    if kwh is not None and not 0 <= kwh < float("inf"):   # NaN too
        raise SpecError(f"--kwh-price must be a price >= 0, got {kwh:g}")
    if any(w <= 0 for w in [*watts_per_type.values(), *([watts_rest] if watts_rest is not None else [])]):
        raise SpecError("--watts must be more than 0")
    if (watts_per_type or watts_rest is not None) and kwh is None:
        raise SpecError("--watts counts only with --kwh-price (the price of the energy it uses)")
    return PriceRules(per_type, rest, kwh, watts_per_type, watts_rest)


def _per_type(flag: str, values: Iterable[str]) -> tuple[dict[str, float], float | None]:
    per_type: dict[str, float] = {}
    rest: float | None = None
    for value in values:
        name, sep, number = value.rpartition("=")
        name = name.strip().lower()
        if sep and not name:
            raise SpecError(f"{flag} {value!r}: a GPU type goes before '=' (e.g. a10g=1.10)")
        try:
            amount = float(number)
        except ValueError:
            raise SpecError(f"{flag} {value!r}: use a number, or TYPE=NUMBER (e.g. a10g=1.10)") from None
        if amount < 0 or amount != amount or amount == float("inf"):
            raise SpecError(f"{flag} {value!r}: must be a number >= 0")
        key = name if sep else None
        if (key in per_type) if key else rest is not None:
            raise SpecError(f"{flag} given twice for {key or 'the rest of the GPUs'}")
        if key:
            per_type[key] = amount
        else:
            rest = amount
    return per_type, rest
