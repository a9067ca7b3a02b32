"""The OpenAI API as the suite speaks it: request validation and response shapes.

Fake engines and reference frontends both serve it, so it lives with the contracts.
A client mistake must get an OpenAI-style error body (``{"error": {"message", "type", "param",
"code"}}``) with 400, 404 or 422, never a 500 or a traceback: wrong JSON types get 422, values
out of range 400, an unknown model 404. ``parse_completion`` and ``parse_chat`` turn a JSON body
into an ``OpenAIRequest`` carrying token ids from the served model's tokenizer
(``servecert.protocol.tokenizer``: words-v1, the suite's, unless the card names another); the ``*_chunk`` and
``*_body`` functions build the streamed and non-streamed answers. Chunks are assembled from
pre-encoded pieces because this is the hottest path of the engine.

Sampling parameters are checked against vLLM's ranges (``vllm/sampling_params.py``
``_verify_args``): a value out of range is a 400 naming the field even though the fake's text does
not depend on it, so a client learns of its mistake here as it would on a real engine. A
parameter the fakes do not implement (``logprobs``, ``echo``, ``suffix``, ``best_of`` > 1,
``tools``, a JSON ``response_format``) is refused with a 400 ``unsupported_parameter`` when it asks
for the feature, never silently ignored; its off value is accepted. Fields the suite does not
know (a router's own extensions) are ignored, as vLLM ignores them.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servecert.protocol import tokenizer
from servecert.protocol.engine_api import Sampling

MAX_TOKENS_LIMIT = 1_000_000
_json_text: dict[str, dict[int, bytes]] = {}  # tokenizer name -> token id -> its text as a JSON string literal


def _encode_text(tok: tokenizer.Tokenizer, token_id: int) -> bytes:
    encoded = json.dumps(tok.decode_token(token_id)).encode()
    _json_text.setdefault(tok.name, {})[token_id] = encoded
    return encoded


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code or {400: "invalid_request", 404: "model_not_found", 422: "invalid_type"}.get(status, "error")

    def body(self) -> dict[str, Any]:
        kind = {404: "NotFoundError", 422: "UnprocessableEntityError", 503: "ServiceUnavailableError"}.get(
            self.status, "BadRequestError" if self.status < 500 else "InternalServerError"
        )
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}}


def http_error(status: int, reason: str, method: str, path: str) -> ApiError:
    """An HTTP-level refusal (unknown route, wrong method, body too large) as an OpenAI error."""
    return ApiError(status, f"{reason}: {method} {path}", code=reason.lower().replace(" ", "_"))


@dataclass(frozen=True)
class OpenAIRequest:
    model: str
    token_ids: list[int]
    sampling: Sampling
    stream: bool
    include_usage: bool
    chat: bool
    tokenizer: tokenizer.Tokenizer = tokenizer.WORDS


def load_json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}", code="invalid_json") from None
    except RecursionError:
        raise ApiError(400, "request body is nested too deeply", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(422, "request body must be a JSON object")
    return body


def _typed(body: dict[str, Any], name: str, kinds: tuple[type, ...], default: Any, prefix: str = "") -> Any:
    """``body[name]`` if it is one of ``kinds``, ``default`` when absent or null; else a 422 naming ``prefix + name``."""
    value = body.get(name, default)
    if value is None:
        return default
    field = prefix + name
    if isinstance(value, bool) and bool not in kinds:
        raise ApiError(422, f"{field} must be of type {'/'.join(k.__name__ for k in kinds)}, got bool", param=field)
    if not isinstance(value, kinds):
        raise ApiError(
            422, f"{field} must be of type {'/'.join(k.__name__ for k in kinds)}, got {type(value).__name__}", param=field
        )
    return value


def _sampling(body: dict[str, Any], prompt_len: int, context_length: int) -> Sampling:
    param = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = _typed(body, param, (int,), None)
    if max_tokens is None:
        max_tokens = max(1, min(16, context_length - prompt_len))
    if max_tokens < 1:
        raise ApiError(400, f"{param} must be at least 1, got {max_tokens}", param=param)
    if max_tokens > MAX_TOKENS_LIMIT or prompt_len + max_tokens > context_length:
        raise ApiError(
            400,
            f"This model's maximum context length is {context_length} tokens. However, you requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} in the completion).",
            param=param,
            code="context_length_exceeded",
        )
    min_tokens = _typed(body, "min_tokens", (int,), 0)
    if min_tokens < 0 or min_tokens > max_tokens:
        raise ApiError(400, f"min_tokens must be within [0, max_tokens={max_tokens}], got {min_tokens}", param="min_tokens")
    n = _typed(body, "n", (int,), 1)
    if n != 1:
        raise ApiError(400, f"only n=1 is supported, got {n}", param="n")
    stop = _typed(body, "stop", (str, list), [])
    stops = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(s, str) and s for s in stops) or len(stops) > 4:
        raise ApiError(422, "stop must be a non-empty string or a list of at most 4 non-empty strings", param="stop")
    seed = _typed(body, "seed", (int,), None)
    if seed is not None and not -(2**63) <= seed < 2**63:
        raise ApiError(400, f"seed must be a 64-bit signed integer, got {seed}", param="seed")
    _check_ranges(body)
    _check_unsupported(body)
    return Sampling(
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=_ignore_eos(body),
        stop=tuple(stops),
        seed=seed,
    )


def _ignore_eos(body: dict[str, Any]) -> bool:
    """vLLM's top-level ``ignore_eos`` (GuideLLM sends it, AIPerf with ``--extra-inputs``), or Dynamo's ``nvext.ignore_eos``,
    which takes precedence there (its ``CommonExt``): either spelling shapes a load tool's output length."""
    nvext = _typed(body, "nvext", (dict,), {})
    if nvext.get("ignore_eos") is not None:
        return bool(_typed(nvext, "ignore_eos", (bool,), False, prefix="nvext."))
    return bool(_typed(body, "ignore_eos", (bool,), False))


# name -> (low, high, low is open): vLLM's ranges; the fakes' text does not depend on them.
_RANGES: dict[str, tuple[float, float, bool]] = {
    "temperature": (0.0, 2.0, False),
    "top_p": (0.0, 1.0, True),
    "min_p": (0.0, 1.0, False),
    "presence_penalty": (-2.0, 2.0, False),
    "frequency_penalty": (-2.0, 2.0, False),
    "repetition_penalty": (0.0, math.inf, True),
}
MAX_LOGPROBS = 20  # NB: vLLM's default --max-logprobs


def _check_ranges(body: dict[str, Any]) -> None:
    for name, (low, high, low_open) in _RANGES.items():
        value = _typed(body, name, (int, float), None)
        if value is None:
            continue
        inside = (low < value if low_open else low <= value) and value <= high and math.isfinite(value)
        if not inside:
            bounds = f"{'(' if low_open else '['}{low:g}, {high:g}]" if math.isfinite(high) else f"greater than {low:g}"
            raise ApiError(400, f"{name} must be a finite number in {bounds}, got {value}", param=name)
    top_k = _typed(body, "top_k", (int,), None)
    if top_k is not None and top_k < -1:
        raise ApiError(400, f"top_k must be -1 or 0 (disabled) or at least 1, got {top_k}", param="top_k")


def _unsupported(name: str, what: str) -> ApiError:
    return ApiError(400, f"{name}: {what} is not supported by servecert's fake engines", param=name, code="unsupported_parameter")


def _check_unsupported(body: dict[str, Any]) -> None:
    """Refuse a feature the fakes do not implement when the request asks for it; accept its off value."""
    logprobs = _typed(body, "logprobs", (bool, int), None)
    top_logprobs = _typed(body, "top_logprobs", (int,), None)
    for name, value in (("logprobs", logprobs), ("top_logprobs", top_logprobs)):
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_LOGPROBS:
            raise ApiError(400, f"{name} must be within [0, {MAX_LOGPROBS}], got {value}", param=name)
    if logprobs not in (None, False) or top_logprobs:
        raise _unsupported("logprobs" if logprobs not in (None, False) else "top_logprobs", "returning log probabilities")
    if _typed(body, "echo", (bool,), False):
        raise _unsupported("echo", "echoing the prompt")
    if _typed(body, "suffix", (str,), ""):
        raise _unsupported("suffix", "a suffix (insertion)")
    best_of = _typed(body, "best_of", (int,), 1)
    if best_of != 1:
        raise ApiError(400, f"only best_of=1 is supported, got {best_of}", param="best_of")
    if _typed(body, "tools", (list,), []):
        raise _unsupported("tools", "tool calling")
    choice = _typed(body, "tool_choice", (str, dict), "none")
    if choice not in ("none", "auto"):  # NB: with no tools, "auto" can only answer in text
        raise _unsupported("tool_choice", "tool calling")
    response_format = _typed(body, "response_format", (dict,), {"type": "text"})
    kind = response_format.get("type")
    if not isinstance(kind, str):
        raise ApiError(422, "response_format.type must be a string", param="response_format")
    if kind != "text":
        raise _unsupported("response_format", f"response_format {kind!r} (structured output)")
    bias = _typed(body, "logit_bias", (dict,), {})
    if not all(_int_like(k) and isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in bias.items()):
        raise ApiError(422, "logit_bias must map token ids to numbers", param="logit_bias")
    _typed(body, "user", (str,), None)


def _int_like(key: str) -> bool:
    return key.lstrip("-").isdigit()


def _common(body: dict[str, Any], served: str) -> tuple[str, bool, bool]:
    model = body.get("model")
    if model is None or model == "":
        raise ApiError(400, "you must provide a model parameter", param="model", code="missing_model")
    if not isinstance(model, str):
        raise ApiError(422, f"model must be a string, got {type(model).__name__}", param="model")
    if model != served:
        raise ApiError(404, f"The model `{model}` does not exist. This engine serves `{served}`.", param="model")
    stream = bool(_typed(body, "stream", (bool,), False))
    options = _typed(body, "stream_options", (dict,), {})
    if options and not stream:
        raise ApiError(400, "stream_options can only be set when stream is true", param="stream_options")
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise ApiError(422, "stream_options.include_usage must be a boolean", param="stream_options")
    return model, stream, include_usage


def _check_context(ids: list[int], context_length: int, param: str) -> None:
    if len(ids) >= context_length:
        raise ApiError(
            400,
            f"This model's maximum context length is {context_length} tokens. However, your prompt has "
            f"{len(ids)} tokens.",
            param=param,
            code="context_length_exceeded",
        )


def _text(value: str, param: str) -> str:
    """Text a tokenizer can encode: JSON can carry a lone surrogate (``"\\ud800"``), UTF-8 cannot."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(400, f"{param} is not valid Unicode text: {exc.reason} at position {exc.start}", param=param) from None
    return value


def parse_completion(
    body: dict[str, Any], served: str, context_length: int, tok: tokenizer.Tokenizer = tokenizer.WORDS
) -> OpenAIRequest:
    model, stream, include_usage = _common(body, served)
    if "prompt" not in body:
        raise ApiError(400, "prompt is required", param="prompt")
    prompt = body["prompt"]
    if isinstance(prompt, str):
        ids = tok.encode(_text(prompt, "prompt"))
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        ids = [int(t) for t in prompt]
        if not all(0 <= t < tokenizer.VOCAB_SIZE for t in ids):
            raise ApiError(400, f"prompt token ids must be within [0, {tokenizer.VOCAB_SIZE})", param="prompt")
    elif isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        ids = tok.encode(_text(prompt[0], "prompt"))
    else:
        raise ApiError(422, "prompt must be a string or a list of token ids", param="prompt")
    if not ids:
        raise ApiError(400, "prompt is empty", param="prompt")
    _check_context(ids, context_length, "prompt")
    return OpenAIRequest(model, ids, _sampling(body, len(ids), context_length), stream, include_usage, chat=False, tokenizer=tok)


def _content(message: dict[str, Any], index: int) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return _text(content, "messages")
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(422, f"messages[{index}].content parts must be {{type: text, text: str}}", param="messages")
            parts.append(_text(part["text"], "messages"))
        return " ".join(parts)
    raise ApiError(422, f"messages[{index}].content must be a string or a list of text parts", param="messages")


def parse_chat(body: dict[str, Any], served: str, context_length: int, tok: tokenizer.Tokenizer = tokenizer.WORDS) -> OpenAIRequest:
    model, stream, include_usage = _common(body, served)
    messages = body.get("messages")
    if messages is None:
        raise ApiError(400, "messages is required", param="messages")
    if not isinstance(messages, list):
        raise ApiError(422, f"messages must be a list, got {type(messages).__name__}", param="messages")
    if not messages:
        raise ApiError(400, "messages must contain at least one message", param="messages")
    pairs: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(422, f"messages[{i}] must be an object with a string role", param="messages")
        if message["role"] not in tokenizer.ROLE_IDS:
            raise ApiError(400, f"messages[{i}].role {message['role']!r} is not a known role", param="messages")
        pairs.append((message["role"], _content(message, i)))
    ids = tok.render_chat(pairs)
    _check_context(ids, context_length, "messages")
    return OpenAIRequest(model, ids, _sampling(body, len(ids), context_length), stream, include_usage, chat=True, tokenizer=tok)


Parse = Callable[[dict[str, Any], str, int, tokenizer.Tokenizer], OpenAIRequest]
"""``parse_completion`` or ``parse_chat``: a body, the served model's name, its context length and tokenizer."""


class ChunkWriter:
    """Pre-encoded pieces of the SSE chunks of one streamed response."""

    def __init__(self, request_id: str, model: str, chat: bool, tok: tokenizer.Tokenizer = tokenizer.WORDS) -> None:
        created = int(time.time())
        self.chat = chat
        self.tokenizer = tok
        if chat:
            head = {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model}
            self._head = ("data: " + json.dumps(head)[:-1] + ',"choices":[{"index":0,"delta":{"content":').encode()
            self._tail = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            head = {"id": request_id, "object": "text_completion", "created": created, "model": model}
            self._head = ("data: " + json.dumps(head)[:-1] + ',"choices":[{"index":0,"text":').encode()
            self._tail = b',"logprobs":null,"finish_reason":null}]}\n\n'
        self._base = {"id": request_id, "object": head["object"], "created": created, "model": model}

    def first(self) -> bytes:
        """Chat streams open with an assistant-role delta, as OpenAI's do."""
        if not self.chat:
            return b""
        chunk = {**self._base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def tokens(self, token_ids: list[int]) -> bytes:
        head, tail, tok = self._head, self._tail, self.tokenizer
        text = _json_text.get(tok.name) or {}
        return b"".join([head + (text.get(t) or _encode_text(tok, t)) + tail for t in token_ids])

    def final(self, finish_reason: str, usage: dict[str, Any] | None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason}
        if self.chat:
            choice["delta"] = {}
        else:
            choice["text"] = ""
        out = b"data: " + json.dumps({**self._base, "choices": [choice]}).encode() + b"\n\n"
        if usage is not None:
            out += b"data: " + json.dumps({**self._base, "choices": [], "usage": usage}).encode() + b"\n\n"
        return out + b"data: [DONE]\n\n"

    @staticmethod
    def error(err: ApiError) -> bytes:
        return b"data: " + json.dumps(err.body()).encode() + b"\n\ndata: [DONE]\n\n"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def full_body(req: OpenAIRequest, request_id: str, text: str, finish_reason: str, use: dict[str, Any]) -> dict[str, Any]:
    created = int(time.time())
    if req.chat:
        return {
            "id": request_id,
            "object": "chat.completion",
            "created": created,
            "model": req.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": use,
        }
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": req.model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
        "usage": use,
    }
