"""Local prices from the options of `gqa local start` and `gqa local price`:
parsed into models/prices.py's rules, each GPU's power limit read through
NVML where it can be, and each GPU's price set in the inventory."""

from .output import fail


PRICE_HELP = ("Price of one GPU-hour: TYPE=PRICE for a GPU type (a10g=1.10), PRICE for the other GPUs "
              "(repeatable).")
KWH_HELP = "Electricity per kWh, added to each GPU's price times its power (for GPUs you own)."
WATTS_HELP = ("A GPU's power for --kwh-price: TYPE=WATTS or WATTS (default: its power limit as NVML reads it, "
              "else its type's usual power, else 300).")


def price_rules(prices: list[str] | None, kwh: float | None, watts: list[str] | None):
    """The options' rules; a bad value is one line and exit 2, before anything is written."""
    from gqa.models.errors import SpecError
    from gqa.models.prices import price_rules as rules

    try:
        return rules(prices or (), kwh, watts or ())
    except SpecError as exc:
        fail(str(exc))


def power_limits(indexes: list[int]) -> dict[int, float]:
    """Each GPU's power limit in watts where NVML reads it here; {} where it cannot."""
    from daemon.simulated_gpus import simulated_nvml
    from gqa.adapters.local.nvml import NvmlGpus, load_nvml
    from gqa.models.errors import BackendUnavailable

    try:
        nvml = simulated_nvml() or load_nvml()
        gpus = NvmlGpus(nvml, indexes)
        try:
            return gpus.power_limits()
        finally:
            gpus.close()
    except BackendUnavailable:
        return {}


def priced(gpus: list[dict], rules, kept: dict[tuple[int, str], float]) -> list[str]:
    """Set each GPU's "price" by the rules, or, with no rules, to the price `kept` for
    the same index and type (else 0). One line per GPU saying how its price came about."""
    limits = power_limits([g["index"] for g in gpus]) if rules.kwh else {}
    lines = []
    for gpu in gpus:
        if rules.empty:
            gpu["price"] = kept.get((gpu["index"], gpu["type"]), 0.0)
            lines.append(f"${gpu['price']:,.4g}")
        else:
            price = rules.price(gpu["type"], limits.get(gpu["index"]))
            gpu["price"] = round(price.hourly, 6)
            lines.append(price.explain(rules.kwh or 0.0))
    return lines


def kept_prices(inventory) -> dict[tuple[int, str], float]:
    return {(g.index, g.type): g.price for g in inventory.gpus} if inventory else {}
