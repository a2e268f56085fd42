#!/usr/bin/env python3
"""A throttling TCP proxy for the benchmarks: a remote store's bandwidth, on loopback.

    throttle_proxy.py --upstream 127.0.0.1:PORT --rate-mbps 200 [--listen 127.0.0.1:0]
                      [--control 127.0.0.1:0] [--max-lifetime-s 3600]

Forwards every connection to the upstream. Bytes from the upstream to clients (the store's answers) pass
one token bucket shared by all connections: `--rate-mbps` MB/s (MB = 1e6 bytes) in total, however many
requests are in flight, with a burst of at most --burst-kb. Requests (client to upstream) are not throttled
but counted. Standard library only (asyncio).

On start it prints one line of JSON on stdout and flushes it: {"listen": PORT, "control": PORT}.
A connection to the control port gets the counters as one line of JSON, then the port closes it:
    {"down_bytes", "up_bytes", "connections", "active", "throttled_s", "rate_bytes_per_s", "uptime_s"}
It exits on SIGTERM/SIGINT, when its stdin reaches end of file (the parent went away), and after
--max-lifetime-s in any case: a proxy a crashed benchmark left behind does not stay.
Listens on loopback only (a non-loopback --listen address is refused).
"""
import argparse
import asyncio
import ipaddress
import json
import signal
import sys
import time

CHUNK = 64 * 1024


class TokenBucket:
    """Shared by every connection; waiters are served in arrival order (the lock is FIFO)."""

    def __init__(self, rate, burst):
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = self.burst
        self.stamp = time.monotonic()
        self.lock = asyncio.Lock()
        self.throttled_s = 0.0

    async def take(self, n):
        async with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            self.tokens -= n  # may go negative: the debt is slept off before the next sender goes
            if self.tokens < 0:
                wait = -self.tokens / self.rate
                self.throttled_s += wait
                await asyncio.sleep(wait)


class Proxy:
    def __init__(self, upstream, bucket):
        self.upstream = upstream
        self.bucket = bucket
        self.down = 0
        self.up = 0
        self.connections = 0
        self.active = 0
        self.started = time.monotonic()

    async def pump(self, reader, writer, downstream):
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if downstream:
                    await self.bucket.take(len(data))
                    self.down += len(data)
                else:
                    self.up += len(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                if writer.can_write_eof():
                    writer.write_eof()
            except (ConnectionError, OSError, RuntimeError):
                pass

    async def handle(self, c_reader, c_writer):
        self.connections += 1
        self.active += 1
        u_writer = None
        try:
            u_reader, u_writer = await asyncio.open_connection(*self.upstream)
            await asyncio.gather(self.pump(c_reader, u_writer, False), self.pump(u_reader, c_writer, True))
        except (ConnectionError, OSError):
            pass
        finally:
            self.active -= 1
            for w in (c_writer, u_writer):
                if w is not None:
                    w.close()

    async def control(self, _reader, writer):
        stats = {
            "down_bytes": self.down, "up_bytes": self.up, "connections": self.connections,
            "active": self.active, "throttled_s": round(self.bucket.throttled_s, 3),
            "rate_bytes_per_s": self.bucket.rate, "uptime_s": round(time.monotonic() - self.started, 3),
        }
        writer.write((json.dumps(stats) + "\n").encode())
        try:
            await writer.drain()
        finally:
            writer.close()


def host_port(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"want HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def loopback(addr):
    if not ipaddress.ip_address(addr[0]).is_loopback:
        raise SystemExit(f"throttle_proxy: {addr[0]} is not a loopback address")
    return addr


async def main(args):
    bucket = TokenBucket(args.rate_mbps * 1e6, args.burst_kb * 1024)
    proxy = Proxy(args.upstream, bucket)
    server = await asyncio.start_server(proxy.handle, *loopback(args.listen), backlog=512)
    ctl = await asyncio.start_server(proxy.control, *loopback(args.control))
    print(json.dumps({"listen": server.sockets[0].getsockname()[1],
                      "control": ctl.sockets[0].getsockname()[1]}), flush=True)
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def stop(*_):
        if not done.done():
            done.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop)
    loop.call_later(args.max_lifetime_s, stop)
    if not sys.stdin.isatty():  # the parent holds our stdin: its end means the parent is gone
        try:
            loop.add_reader(sys.stdin.fileno(), lambda: (sys.stdin.buffer.raw.read(4096) or stop()))
        except (ValueError, OSError, PermissionError):
            pass  # stdin is /dev/null or a file (not pollable): the lifetime bound still holds
    await done
    server.close()
    ctl.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--upstream", type=host_port, required=True)
    p.add_argument("--listen", type=host_port, default=("127.0.0.1", 0))
    p.add_argument("--control", type=host_port, default=("127.0.0.1", 0))
    p.add_argument("--rate-mbps", type=float, required=True, help="MB/s (1e6 bytes) upstream to clients")
    p.add_argument("--burst-kb", type=float, default=256.0)
    p.add_argument("--max-lifetime-s", type=float, default=3600.0)
    asyncio.run(main(p.parse_args()))
