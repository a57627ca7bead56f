"""Drive puts and gets through Mooncake's own Python client over TCP; run by the venv's python.

    python client.py MASTER_ADDRESS METADATA_URL SEGMENT_BYTES

Sets the client up (it mounts a memory segment of SEGMENT_BYTES into the store) and prints
``{"setup": rc}``. Then reads one plan a line on stdin, a JSON list of steps
(``{"op": "put", "key": k, "size": n}``, ``{"op": "get", "key": k}``), runs it and prints one
JSON line: for each step what the client answered (put: its return code, 0 = stored; get: the
bytes it got back, 0 for a miss). The test's truth is this, the client's own account. An empty
line or the end of stdin closes the client (its segment is unmounted) and exits.
Needs the stand-in CUDA libraries on LD_LIBRARY_PATH (support/real_mooncake/cuda_standin.py).
"""

from __future__ import annotations

import json
import sys

from mooncake.store import MooncakeDistributedStore  # type: ignore[import-not-found]

BUFFER_BYTES = 64 * 1024 * 1024


def main() -> int:
    master, metadata, segment = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", metadata, segment, BUFFER_BYTES, "tcp", "", master)
    print(json.dumps({"setup": rc}), flush=True)
    if rc != 0:
        return 1
    for line in sys.stdin:
        if not line.strip():
            break
        results: list[int] = []
        for step in json.loads(line):
            if step["op"] == "put":
                value = bytes([len(results) % 251]) * int(step["size"])
                results.append(store.put(step["key"], value))
            else:
                results.append(len(store.get(step["key"])))
        print(json.dumps({"results": results}), flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
