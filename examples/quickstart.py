#!/usr/bin/env python3
"""pjrtd quick start: list devices, upload arrays, read them back, compile
and run a program.

Run against a daemon with ``PJRTD_ADDRESS=unix:///path/to.sock`` (``make
demo`` starts one for you).
"""

import numpy as np

import pjrt_client


# relu(x) + 1 as jax.jit(f).lower(x).as_text() prints it (StableHLO): what
# a JAX user hands pjrtd as it is.
#
#   def f(x): return jax.nn.relu(x) + 1
#   print(jax.jit(f).lower(jnp.zeros(4, jnp.float32)).as_text())
RELU_PLUS_ONE = """module @jit_f attributes {mhlo.num_partitions = 1 : i32, \
mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32> \
{jax.result_info = ""}) {
    %0 = call @relu(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> \
tensor<4xf32>
    %2 = stablehlo.add %0, %1 : tensor<4xf32>
    return %2 : tensor<4xf32>
  }
  func.func private @relu(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> \
tensor<4xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"""


def main() -> None:
    with pjrt_client.connect(client_name="quickstart") as client:
        info = client.info()
        print(f"connected to pjrtd {info['build_version']} at "
              f"{client.address} ({info['platform']} platform)")

        devices = client.devices()
        print(f"{len(devices)} device(s):")
        for d in devices:
            print(f"  {d}: {d.kind}, {d.memory_bytes / 2**30:.1f} GiB")

        arrays = {
            "weights f32[2,3]": np.arange(6, dtype=np.float32).reshape(2, 3),
            "labels s32[4]": np.array([3, 1, 4, 1], dtype=np.int32),
            "mask pred[2,2]": np.array([[True, False], [False, True]]),
            "scalar f64[]": np.float64(2.718281828),
        }
        for i, (name, array) in enumerate(arrays.items()):
            device = devices[i % len(devices)]
            buffer = client.put(array, device=device)
            back = buffer.to_numpy()
            same = np.array_equal(back, array)
            print(f"uploaded {name} to {device} as {buffer!r}; read back "
                  f"{'identical' if same else 'DIFFERENT'}: "
                  f"{np.array2string(back, separator=', ')}")
            assert same

        big = client.put(np.ones((1024, 1024), dtype=np.float32))
        copy = big.copy_to(devices[-1])
        print(f"copied 4 MiB from {big.device} to {copy.device}: "
              f"sum {copy.to_numpy().sum():.0f}")

        # A StableHLO program (HLO text, as_text(dialect="hlo"), works
        # too): relu(x) + 1.
        program = client.compile(RELU_PLUS_ONE)
        print(f"compiled {program!r} in {program.compile_seconds:.4f}s "
              f"(cache hit: {program.cache_hit})")
        x = client.put(np.array([-2.0, -0.5, 0.0, 1.5], dtype=np.float32),
                       device=devices[0])
        (y,) = program.execute([x])
        print(f"relu(x) + 1 of {x.to_numpy()} is {y.to_numpy()}")
        assert np.array_equal(y.to_numpy(), [1.0, 1.0, 1.0, 2.5])

        used = [d["bytes_in_use"] for d in client.stats()["devices"]]
        print(f"bytes in use per device: {used}")
    print("closed the session; the daemon freed its buffers and executables")


if __name__ == "__main__":
    main()
