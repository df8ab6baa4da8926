"""A delaying TCP relay, for kernels without `tc netem`: latency between hosts and database.

    python -m benchmarks.cluster.relay --listen 198.18.0.1:56001 --listen ... \
        --target /tmp/.../sockets/.s.PGSQL.55432 --delay-ms 10

Each byte is held `--delay-ms` in each direction (so a round trip gains twice that), in order,
without limiting throughput: every chunk read is stamped and written once its time has come.
The harness runs it inside the db namespace, one listening port per host, so a cut link
still cuts the host (its packets to the relay are lost) and other hosts are not delayed by it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy reader to writer, each chunk `delay` seconds after it arrived."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    delivery = asyncio.ensure_future(deliver())
    try:
        while True:
            data = await reader.read(65536)
            queue.put_nowait((time.monotonic() + delay, data))
            if not data:
                break
        await delivery
    except (ConnectionError, OSError):
        delivery.cancel()
    finally:
        writer.close()


async def serve(listen: list[str], target: str, delay: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            if target.startswith("/"):
                server_r, server_w = await asyncio.open_unix_connection(target)
            else:
                host, port = target.rsplit(":", 1)
                server_r, server_w = await asyncio.open_connection(host, int(port))
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            pump(client_r, server_w, delay), pump(server_r, client_w, delay), return_exceptions=True
        )

    servers = []
    for address in listen:
        host, port = address.rsplit(":", 1)
        servers.append(await asyncio.start_server(handle, host, int(port)))
    print("relay ready", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", action="append", required=True, help="HOST:PORT")
    parser.add_argument("--target", required=True, help="HOST:PORT or a Unix socket path")
    parser.add_argument("--delay-ms", type=float, required=True, help="each direction")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, args.target, args.delay_ms / 1000))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
