"""pjrt_client: use the accelerators that a pjrtd daemon serves.

Quick start::

    import numpy as np
    import pjrt_client

    with pjrt_client.connect("unix:///run/pjrtd/pjrtd.sock") as client:
        print(client.devices())
        x = client.put(np.arange(6, dtype=np.float32).reshape(2, 3), device=0)
        print(x.shape, x.dtype, x.device)
        print(x.to_numpy())
        program = client.compile(hlo_text)  # as XLA or JAX prints it
        (y,) = program.execute([x])
        print(y.to_numpy())

Every buffer and executable belongs to the client's session on the daemon;
closing the client frees them all. Errors are :class:`Error` subclasses
named after the gRPC status code (``InvalidArgumentError``,
``NotFoundError``, ...), with the daemon's message intact.
"""

from pjrt_client._common import (ADDRESS_ENV_VAR, CHUNK_BYTES,
                                 DEFAULT_ADDRESS, PROTOCOL_VERSION,
                                 ArrayShape, Device, resolve_address)
from pjrt_client._buffer import Buffer
from pjrt_client._executable import Executable
from pjrt_client._client import Client, connect
from pjrt_client._shm import Region
from pjrt_client._errors import (AbortedError, AlreadyExistsError,
                                 CancelledError, DataLossError,
                                 DeadlineExceededError, Error,
                                 FailedPreconditionError, InternalError,
                                 InvalidArgumentError, NotFoundError,
                                 OutOfRangeError, PermissionDeniedError,
                                 ResourceExhaustedError, UnauthenticatedError,
                                 UnavailableError, UnimplementedError,
                                 UnknownError)

__all__ = [
    "ADDRESS_ENV_VAR", "CHUNK_BYTES", "DEFAULT_ADDRESS", "PROTOCOL_VERSION",
    "ArrayShape", "Buffer", "Client", "Device", "Executable", "Region",
    "connect",
    "resolve_address",
    "Error", "AbortedError", "AlreadyExistsError", "CancelledError",
    "DataLossError", "DeadlineExceededError", "FailedPreconditionError",
    "InternalError", "InvalidArgumentError", "NotFoundError",
    "OutOfRangeError", "PermissionDeniedError", "ResourceExhaustedError",
    "UnauthenticatedError", "UnavailableError", "UnimplementedError",
    "UnknownError",
]
