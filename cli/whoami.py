"""`gqa whoami`: the owner name jobs are submitted as, and the caller's roles."""

from .app import app
from .options import Output, check_output
from .output import print_json, user_errors


@app.command("whoami")
def whoami(output: Output = "table"):
    """Who the queue thinks you are (on AWS: your IAM identity) and what you may do."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        me = backend().whoami()
    if fmt == "json":
        print_json(me)
        return
    print(f"{me['owner']} ({', '.join(me['roles'])})" + (f"  {me['arn']}" if me.get("arn") else ""))
