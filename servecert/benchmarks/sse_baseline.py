"""A bare aiohttp SSE server: the baseline the engine's streaming throughput is compared with.

It answers ``POST /v1/completions`` with ``--tokens`` chunks shaped like the engine's, written
one write per chunk as fast as the event loop allows, with no engine, batching or tokenizer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

from aiohttp import web


async def completions(request: web.Request) -> web.StreamResponse:
    await request.read()
    tokens: int = request.app[TOKENS]
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    chunk = {"id": "cmpl-baseline", "object": "text_completion", "created": 0, "model": "bench",
             "choices": [{"index": 0, "text": " kalomi", "logprobs": None, "finish_reason": None}]}
    data = b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
    for _ in range(tokens):
        await resp.write(data)
        await asyncio.sleep(0)
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


TOKENS = web.AppKey("tokens", int)


async def main(tokens: int) -> None:
    app = web.Application()
    app[TOKENS] = tokens
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"baseline url=http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32)
    asyncio.run(main(parser.parse_args().tokens))
