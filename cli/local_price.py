"""`gqa local price [--price [TYPE=]PRICE]... [--kwh-price P] [--watts [TYPE=]W]...`:
what a GPU-hour costs on this machine's queue, shown or set. `gqa local
start` takes the same options; without them it keeps the prices the queue
had. A running daemon uses new prices at once: an attempt is charged at its
GPUs' price when it ends (models/prices.py says how a price is made)."""

from typing import Annotated, Optional

import typer

from .local import app
from .options import Output, check_output
from .output import fail, note, print_json, user_errors
from .prices import KWH_HELP, PRICE_HELP, WATTS_HELP, kept_prices, price_rules, priced

@app.command("price")
def price(
    prices: Annotated[Optional[list[str]], typer.Option("--price", metavar="[TYPE=]PRICE", help=PRICE_HELP)] = None,
    kwh_price: Annotated[Optional[float], typer.Option("--kwh-price", help=KWH_HELP)] = None,
    watts: Annotated[Optional[list[str]], typer.Option("--watts", metavar="[TYPE=]WATTS", help=WATTS_HELP)] = None,
    output: Output = "table",
):
    """Show or set what a GPU-hour costs on this machine; a running queue uses new prices at once."""
    fmt = check_output(output)
    rules = price_rules(prices, kwh_price, watts)
    with user_errors():
        from gqa.settings_codec import inventory_from_dict, inventory_to_dict

        from .local_backend import LocalBackend

        backend = LocalBackend()         # whatever `gqa config` says: this is the machine's own queue
        backend.require_queue()          # prices are its GPUs': where no queue is, none is made
        store = backend.store
        inventory = store.inventory()
        if inventory is None:
            fail("this queue has no GPUs yet: `gqa local start` first")
        data = inventory_to_dict(inventory)
        how = priced(data["gpus"], rules, kept_prices(inventory))
        if not rules.empty:
            store.set_inventory(inventory_from_dict(data))
    if fmt == "json":
        print_json({"gpus": [{"index": g["index"], "type": g["type"], "price": g["price"], "how": h}
                             for g, h in zip(data["gpus"], how)], "kwh_price": rules.kwh})
        return
    if not rules.empty:
        note("prices set; the daemon charges them from now on, each attempt at its end")
    print(f"{'GPU':>4}  {'type':<10} {'per hour':>10}  how")
    for gpu, line in zip(data["gpus"], how):
        print(f"{gpu['index']:>4}  {gpu['type']:<10} {'$' + format(gpu['price'], ',.4f'):>10}  {line}")
