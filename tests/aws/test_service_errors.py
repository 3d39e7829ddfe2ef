"""Errors of SQS, S3, SNS and Batch -> domain errors, by code only."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from gqa.adapters.aws import errors
from gqa.models.errors import BackendUnavailable, Conflict, LaunchFailed, Misconfigured, NotFound

pytestmark = pytest.mark.aws


def client_error(code: str, message: str = "whatever") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Op")


@pytest.mark.parametrize("code, message, transient, domain", [
    ("SlowDown", "", True, BackendUnavailable),
    ("RequestThrottled", "", True, BackendUnavailable),
    ("TooManyRequestsException", "", True, BackendUnavailable),
    ("Throttling", "", True, BackendUnavailable),
    ("ServerException", "", True, BackendUnavailable),
    ("NoSuchBucket", "", False, NotFound),
    ("404", "", False, NotFound),
    ("AWS.SimpleQueueService.NonExistentQueue", "", False, NotFound),
    ("QueueDoesNotExist", "", False, NotFound),
    ("NotFound", "", False, NotFound),
    ("PreconditionFailed", "", False, Conflict),
    ("AccessDenied", "NoSuchBucket", False, Misconfigured),
    ("AuthorizationError", "", False, Misconfigured),
    ("ExpiredToken", "", False, Misconfigured),
    ("InvalidParameter", "Rate exceeded; topic does not exist", False, BackendUnavailable),
])
def test_service_errors_are_judged_by_code_never_by_message(code, message, transient, domain):
    error = client_error(code, message)
    assert errors.is_service_transient(error) is transient
    assert type(errors.service_translator("S3", {})(error, "Op")) is domain


def test_a_callers_codes_come_first():
    translate = errors.service_translator("Batch", {"ClientException": LaunchFailed})
    assert type(translate(client_error("ClientException"), "SubmitJob")) is LaunchFailed
    assert type(translate(client_error("NotFound"), "SubmitJob")) is NotFound


def test_only_throttling_is_surely_not_carried_out():
    assert errors.is_service_throttling(client_error("TooManyRequestsException"))
    assert not errors.is_service_throttling(client_error("ServerException"))
