#!/usr/bin/env python3
"""A throttling, fault-injecting HTTP/1.1 proxy for the blob store tests (loopback only, stdlib only).

It forwards each client connection to one upstream connection, request by request (it parses request and
response framing, so it can fail, cut or corrupt single responses). Modes are set at run time through a
line-based control port (one command per line, one reply line each):

  throttle N          limit traffic to N bytes/s, shared by all connections (0 = unlimited)
  fail_next K         answer the next K requests with 503 (without forwarding them)
  fail_fraction F     answer a fraction F (0..1) of requests with 503
  reset_next K        cut the next K responses half way through the body with a TCP reset
  down / up           stop accepting connections (they are refused) / accept again
  corrupt PATTERN     flip one byte in the body of responses whose request path contains PATTERN
  corrupt_off         stop corrupting
  clear               every mode off
  stats               a JSON object: requests, failed, resets, corrupted, connections, bytes_up, bytes_down

usage: fault_proxy.py --target HOST:PORT --ready FILE [--max-lifetime SECONDS]
The ready file receives {"port": P, "control_port": C} once both listen. The proxy exits by itself after
--max-lifetime seconds (default 600), so a crashed test leaves nothing running for long.
"""
import argparse
import asyncio
import json
import os
import random
import socket
import struct
import sys
import time

MAX_HEAD = 64 * 1024


class Modes:
    def __init__(self):
        self.clear()
        self.stats = dict(requests=0, failed=0, resets=0, corrupted=0, connections=0, bytes_up=0, bytes_down=0)

    def clear(self):
        self.rate = 0
        self.fail_next = 0
        self.fail_fraction = 0.0
        self.reset_next = 0
        self.corrupt = None


class Throttle:
    """One token bucket for all connections: callers wait until their bytes fit the rate."""

    def __init__(self, modes):
        self.modes = modes
        self.next_free = time.monotonic()

    async def take(self, n):
        rate = self.modes.rate
        if rate <= 0:
            return
        now = time.monotonic()
        start = max(now, self.next_free)
        self.next_free = start + n / rate
        delay = self.next_free - now
        if delay > 0:
            await asyncio.sleep(delay)


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEAD:
        raise ValueError("head too long")
    return head


def header_value(head, name):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip()
    return None


async def relay_body(reader, writer, length, throttle, counter, modes, cut_at=None, corrupt_at=None):
    """Copies exactly `length` bytes; cuts (returns False) at cut_at, flips the byte at corrupt_at."""
    done = 0
    while done < length:
        chunk = await reader.read(min(65536, length - done))
        if not chunk:
            raise ConnectionError("upstream closed early")
        if corrupt_at is not None and done <= corrupt_at < done + len(chunk):
            i = corrupt_at - done
            chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
        if cut_at is not None and done + len(chunk) > cut_at:
            chunk = chunk[: cut_at - done]
            writer.write(chunk)
            await writer.drain()
            return False
        await throttle.take(len(chunk))
        writer.write(chunk)
        await writer.drain()
        modes.stats[counter] += len(chunk)
        done += len(chunk)
    return True


async def relay_chunked(reader, writer, throttle, modes):
    while True:
        line = await reader.readuntil(b"\r\n")
        writer.write(line)
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            while True:
                trailer = await reader.readuntil(b"\r\n")
                writer.write(trailer)
                if trailer == b"\r\n":
                    await writer.drain()
                    return
        await relay_body(reader, writer, size + 2, throttle, "bytes_down", modes)


def rst(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def serve_client(creader, cwriter, target, modes, throttle):
    modes.stats["connections"] += 1
    host, port = target
    ureader = uwriter = None
    try:
        while True:
            try:
                head = await read_head(creader)
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
                return
            modes.stats["requests"] += 1
            request_line = head.split(b"\r\n", 1)[0].split(b" ")
            method, path = request_line[0], request_line[1] if len(request_line) > 1 else b"/"
            length = int(header_value(head, b"content-length") or b"0")
            body = await creader.readexactly(length) if length else b""
            modes.stats["bytes_up"] += len(head) + len(body)
            if modes.fail_next > 0 or (modes.fail_fraction and random.random() < modes.fail_fraction):
                modes.fail_next = max(0, modes.fail_next - 1)
                modes.stats["failed"] += 1
                msg = b"injected failure\n"
                cwriter.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (len(msg), msg))
                await cwriter.drain()
                continue
            if uwriter is None:
                ureader, uwriter = await asyncio.open_connection(host, port)
            await throttle.take(len(head) + len(body))
            uwriter.write(head + body)
            await uwriter.drain()
            rhead = await read_head(ureader)
            status = int(rhead.split(b" ")[1])
            await throttle.take(len(rhead))
            cwriter.write(rhead)
            modes.stats["bytes_down"] += len(rhead)
            no_body = method == b"HEAD" or status in (204, 304) or 100 <= status < 200
            if no_body:
                await cwriter.drain()
                continue
            te = header_value(rhead, b"transfer-encoding")
            clen = header_value(rhead, b"content-length")
            if te is not None and te.lower() == b"chunked":
                await relay_chunked(ureader, cwriter, throttle, modes)
                continue
            if clen is None:  # delimited by close
                while chunk := await ureader.read(65536):
                    await throttle.take(len(chunk))
                    cwriter.write(chunk)
                    modes.stats["bytes_down"] += len(chunk)
                await cwriter.drain()
                return
            clen = int(clen)
            cut_at = corrupt_at = None
            if modes.reset_next > 0 and clen > 1:
                modes.reset_next -= 1
                modes.stats["resets"] += 1
                cut_at = clen // 2
            if modes.corrupt and modes.corrupt.encode() in path and clen > 0:
                modes.stats["corrupted"] += 1
                corrupt_at = clen // 2
            if not await relay_body(ureader, cwriter, clen, throttle, "bytes_down", modes, cut_at, corrupt_at):
                rst(cwriter)
                return
    except (ConnectionError, asyncio.IncompleteReadError, OSError, ValueError, IndexError):
        return
    finally:
        for w in (cwriter, uwriter):
            if w is not None and not w.transport.is_closing():
                w.close()


class Proxy:
    def __init__(self, target):
        self.target = target
        self.modes = Modes()
        self.throttle = Throttle(self.modes)
        self.server = None
        self.port = 0

    async def listen(self):
        self.server = await asyncio.start_server(
            lambda r, w: serve_client(r, w, self.target, self.modes, self.throttle),
            "127.0.0.1", self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def command(self, line):
        words = line.split()
        if not words:
            return "error: empty command"
        cmd, args = words[0], words[1:]
        m = self.modes
        if cmd == "throttle":
            m.rate = int(args[0])
        elif cmd == "fail_next":
            m.fail_next = int(args[0])
        elif cmd == "fail_fraction":
            m.fail_fraction = float(args[0])
        elif cmd == "reset_next":
            m.reset_next = int(args[0])
        elif cmd == "corrupt":
            m.corrupt = args[0]
        elif cmd == "corrupt_off":
            m.corrupt = None
        elif cmd == "clear":
            m.clear()
        elif cmd == "down":
            if self.server is not None:
                self.server.close()
                await self.server.wait_closed()
                self.server = None
        elif cmd == "up":
            if self.server is None:
                await self.listen()
        elif cmd == "stats":
            return json.dumps(m.stats)
        else:
            return "error: unknown command " + cmd
        return "ok"

    async def control_client(self, reader, writer):
        try:
            while line := await reader.readline():
                try:
                    reply = await self.command(line.decode().strip())
                except (ValueError, IndexError) as e:
                    reply = f"error: {e}"
                writer.write(reply.encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--max-lifetime", type=float, default=600)
    a = ap.parse_args()
    host, _, port = a.target.rpartition(":")
    proxy = Proxy((host, int(port)))
    await proxy.listen()
    control = await asyncio.start_server(proxy.control_client, "127.0.0.1", 0)
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"port": proxy.port, "control_port": control.sockets[0].getsockname()[1]}, f)
    os.rename(tmp, a.ready)
    await asyncio.sleep(a.max_lifetime)
    print("fault_proxy: max lifetime reached, exiting", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
