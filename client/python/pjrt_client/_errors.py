"""Exceptions raised by pjrt_client: one class per gRPC status code."""

from __future__ import annotations

import grpc


class Error(Exception):
    """Base of every error pjrt_client raises.

    Attributes:
        code: the gRPC status code (``grpc.StatusCode``).
        message: the daemon's message, intact (or the client's, for errors
            detected before anything was sent).
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class CancelledError(Error):
    """The operation was cancelled (for example, its stream was cut off)."""
    code = grpc.StatusCode.CANCELLED


class UnknownError(Error):
    """An error the daemon could not classify."""
    code = grpc.StatusCode.UNKNOWN


class InvalidArgumentError(Error, ValueError):
    """A bad argument: the message names it and says what would be right."""
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(Error, TimeoutError):
    """A wait ran past its timeout."""
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(Error, LookupError):
    """An unknown handle or session (or one that belongs to someone else)."""
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(Error):
    """Something that should be new already exists."""
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDeniedError(Error):
    """The caller may not do this."""
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(Error):
    """Out of device memory or over a queue limit; the message has numbers."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(Error):
    """The object is not in a state that allows this (deleted, donated...)."""
    code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(Error):
    """The operation was aborted."""
    code = grpc.StatusCode.ABORTED


class OutOfRangeError(Error, IndexError):
    """A value outside its valid range."""
    code = grpc.StatusCode.OUT_OF_RANGE


class UnimplementedError(Error, NotImplementedError):
    """Not supported by this daemon (for example, an HLO op)."""
    code = grpc.StatusCode.UNIMPLEMENTED


class InternalError(Error):
    """A bug in pjrtd; please report it with the message."""
    code = grpc.StatusCode.INTERNAL


class UnavailableError(Error, ConnectionError):
    """The daemon cannot be reached, or is shutting down."""
    code = grpc.StatusCode.UNAVAILABLE


class DataLossError(Error):
    """Data was lost or corrupted in transit."""
    code = grpc.StatusCode.DATA_LOSS


class UnauthenticatedError(Error):
    """The caller's identity could not be established."""
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[grpc.StatusCode, type[Error]] = {
    cls.code: cls
    for cls in (
        CancelledError, UnknownError, InvalidArgumentError,
        DeadlineExceededError, NotFoundError, AlreadyExistsError,
        PermissionDeniedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError,
        UnimplementedError, InternalError, UnavailableError, DataLossError,
        UnauthenticatedError,
    )
}


def error_for_code(code: grpc.StatusCode, message: str) -> Error:
    """Returns the Error subclass instance for ``code``."""
    return _BY_CODE.get(code, UnknownError)(message)


def from_rpc_error(error: grpc.RpcError) -> Error:
    """Converts a ``grpc.RpcError`` into the matching :class:`Error`."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return error_for_code(code, details or "")
