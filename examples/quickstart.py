#!/usr/bin/env python3
"""pjrtd quick start: list devices, upload arrays, read them back.

Run against a daemon with ``PJRTD_ADDRESS=unix:///path/to.sock`` (``make
demo`` starts one for you).
"""

import numpy as np

import pjrt_client


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

        used = [d["bytes_in_use"] for d in client.stats()["devices"]]
        print(f"bytes in use per device: {used}")
    print("closed the session; the daemon freed its buffers")


if __name__ == "__main__":
    main()
