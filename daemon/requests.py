"""What the daemon answers on its socket (server.py carries the bytes):
the light client's `gqa submit` (POST /cli/submit), the daemon's own
status (GET /daemon), and every route of the gqa API (routes.Router, the
same routes and JSON as the API function on AWS) for a shared box, whose
users cannot read the database themselves.

On a single-user queue only its owner (and root) may ask anything, and they
administer it: they may submit for any team (daemon/callers.py)."""

from __future__ import annotations

import logging
import os
import pwd
from dataclasses import dataclass
from typing import Any, Callable

from .callers import owner_principal
from .server import Peer

log = logging.getLogger("gqa.daemon")


@dataclass
class RequestHandler:
    submit: Any                       # SubmitCommand
    status: Callable[[], dict]        # the daemon's own state, for GET /daemon
    router: Any = None                # routes.Router on a shared box; None on a single-user queue
    principal: Callable[[Peer], Any] | None = None   # the caller's Principal (shared box)

    def __call__(self, peer: Peer, request: dict) -> tuple[int, object]:
        method, path = request.get("method"), request.get("path")
        if request.get("v") != 1 or not isinstance(method, str) or not isinstance(path, str):
            return 400, {"error": "malformed request: expected {\"v\": 1, \"method\", \"path\", ...}; "
                                  "is this gqa as new as the daemon?"}
        if self.router is None and peer.uid not in (os.geteuid(), 0):
            return 403, {"error": f"this queue belongs to {_name(os.geteuid())}; start your own with "
                                  "`gqa local start`, or ask for a shared one (`gqa local start --system`)"}
        if (method, path) == ("GET", "/daemon"):
            return 200, self.status()
        if self.router is None and (method, path) != ("POST", "/cli/submit"):
            return 404, {"error": f"no such request {method} {path} on a single-user queue"}
        try:
            # who may submit for which team is the caller's, as every other path checks it
            caller = owner_principal(peer.uid, peer.gid) if self.principal is None else self.principal(peer)
        except Exception as exc:   # NotPermitted for a uid with no user name
            if path == "/cli/submit":
                return 200, {"code": 2, "stdout": "", "stderr": f"gqa: error: {exc}\n"}
            return 403, {"error": str(exc)}
        if (method, path) == ("POST", "/cli/submit"):
            return 200, self._submit(caller, request.get("body"))
        return self.router.handle(caller, method, path, request.get("query"), request.get("body"))

    def _submit(self, caller: Any, body: Any) -> dict:
        if not (isinstance(body, dict) and isinstance(body.get("argv"), list) and isinstance(body.get("cwd"), str)
                and isinstance(body.get("env"), dict)):
            return {"code": 2, "stdout": "", "stderr": "gqa: error: malformed submit request\n"}
        argv = [str(a) for a in body["argv"]]
        env = {str(k): str(v) for k, v in body["env"].items()}
        return self.submit.run(argv, body["cwd"], env, caller.owner, caller=caller, files=body.get("files"))


def _name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None
