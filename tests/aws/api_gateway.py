"""API Gateway's side of the gqa API, for tests: the REST proxy event it hands
the Lambda, and a transport for ApiClient that does what API Gateway does with
AWS_IAM authorisation: check the SigV4 signature, take the caller's identity
from the access key that signed it, and call the handler with the event."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.aws.aws_limits import gateway_answer
from tests.aws.moto_support import LambdaContext

ACCOUNT = "123456789012"
REGION = "us-east-1"
STAGE = "prod"
ENDPOINT = f"https://abc123.execute-api.{REGION}.amazonaws.com/{STAGE}"
_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                   r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")


def user_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:user/{name}"


def rest_event(method: str, path: str, *, arn: str | None, body: Any = None, query: Mapping[str, str] | None = None,
               headers: Mapping[str, str] | None = None, access_key: str | None = None) -> dict[str, Any]:
    """A REST API Lambda proxy event as API Gateway sends it for a `{proxy+}`
    resource; `arn` None is a caller without an IAM identity."""
    text = body if isinstance(body, str) or body is None else json.dumps(body)
    identity = {
        "accountId": ACCOUNT if arn else None, "caller": f"AIDA{uuid.uuid4().hex[:16].upper()}" if arn else None,
        "userArn": arn, "user": None, "accessKey": access_key, "sourceIp": "203.0.113.7",
        "cognitoIdentityPoolId": None, "cognitoIdentityId": None, "cognitoAuthenticationType": None,
        "cognitoAuthenticationProvider": None, "principalOrgId": None, "userAgent": "gqa-cli",
    }
    headers = dict(headers or {"Content-Type": "application/json"})
    query = dict(query or {}) or None
    return {
        "resource": "/{proxy+}", "path": path, "httpMethod": method,
        "headers": headers, "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query, "multiValueQueryStringParameters": {k: [v] for k, v in query.items()}
        if query else None,
        "pathParameters": {"proxy": path.lstrip("/")}, "stageVariables": None,
        "requestContext": {
            "resourceId": "abc1", "resourcePath": "/{proxy+}", "httpMethod": method, "path": f"/{STAGE}{path}",
            "accountId": ACCOUNT, "apiId": "abc123", "stage": STAGE, "protocol": "HTTP/1.1",
            "requestId": str(uuid.uuid4()), "requestTime": "01/Nov/2026:12:00:00 +0000",
            "requestTimeEpoch": 1793534400000, "domainName": f"abc123.execute-api.{REGION}.amazonaws.com",
            "identity": identity,
        },
        "body": text, "isBase64Encoded": False,
    }


@dataclass
class Caller:
    name: str
    arn: str
    access_key: str
    secret: str = "secret"


@dataclass
class FakeApiGateway:
    """`transport(method, url, headers, body) -> (status, body)` for ApiClient."""

    handler: Callable[[dict[str, Any], Any], dict[str, Any]]
    callers: dict[str, Caller] = field(default_factory=dict)       # access key id -> caller
    seen: list[dict[str, Any]] = field(default_factory=list)       # the requests, as signed

    def add(self, name: str, arn: str | None = None) -> Caller:
        caller = Caller(name, arn or user_arn(name), f"AKIA{name.upper():X<16}"[:20])
        self.callers[caller.access_key] = caller
        return caller

    def __call__(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None) -> tuple[int, bytes]:
        self.seen.append({"method": method, "url": url, "headers": dict(headers), "body": body})
        parts = urlsplit(url)
        match = _AUTH.match(headers.get("Authorization", ""))
        if not match:
            return 403, b'{"message":"Missing Authentication Token"}'
        key, _, region, service, _, signature = match.groups()
        caller = self.callers.get(key)
        if caller is None:
            return 403, b'{"message":"The security token included in the request is invalid."}'
        if service != "execute-api" or region != REGION or signature != _signature(method, url, headers, body,
                                                                                    caller, region):
            return 403, b'{"message":"The request signature we calculated does not match the signature you provided."}'
        path = unquote(parts.path.removeprefix(f"/{STAGE}"))
        event = rest_event(method, path, arn=caller.arn, body=(body or b"").decode() or None,
                           query=dict(parse_qsl(parts.query)), access_key=key,
                           headers={k: v for k, v in headers.items() if k.lower() != "authorization"})
        answer = gateway_answer(lambda: self.handler(event, LambdaContext(function_name="gqa-api")))
        return answer["statusCode"], (answer.get("body") or "").encode()


def _signature(method: str, url: str, headers: Mapping[str, str], body: bytes | None, caller: Caller,
               region: str) -> str:
    """The signature API Gateway computes for the request, with the caller's secret."""
    unsigned = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    request = AWSRequest(method=method, url=url, data=body or b"", headers=unsigned)
    request.context["timestamp"] = headers["X-Amz-Date"]
    auth = SigV4Auth(Credentials(caller.access_key, caller.secret), "execute-api", region)
    return auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
