"""The hook's server path: ask a running `nooa-mcp serve --transport http` (DESIGN.md §12).

The server has the model loaded and the vector index warm, so it answers with what recall
gives — meaning as well as keywords. The command hook POSTs Claude Code's hook JSON to the
server's `/hooks` route, exactly what a `"type": "http"` hook would send, and prints the answer.

For an `http://` server (loopback, as `serve` binds by default) the request is one HTTP/1.1
exchange over a plain socket: `http.client` and `urllib.parse` cost a fresh process ~60 ms to
import, more than the server takes to answer. `https://` goes through `http.client`.
"""

from __future__ import annotations

import json
import re
import socket
import time

__all__ = ["HOOK_PATH", "PROJECT_FIELD", "RemoteFailed", "ask", "hook_url"]

#: The route beside /mcp that answers Claude Code hooks (see hooks/http.py).
HOOK_PATH = "/hooks"
#: The field the command hook adds to the hook JSON it posts: the project it found from the
#: cwd on its own disk (the server reads none of a client's paths).
PROJECT_FIELD = "nooa_project"
#: The largest answer read back (the hook's context is a few thousand characters).
MAX_ANSWER = 256 * 1024
_URL = re.compile(r"^(https?)://(\[[0-9A-Fa-f:.]+\]|[^/:?#\s]+)(?::(\d{1,5}))?(/[^?#\s]*)?$")


class RemoteFailed(Exception):
    """The server did not answer usefully (refused, timed out, an error status)."""


def hook_url(url: str) -> str:
    """The hook route of a server given by its base URL or its /mcp URL."""
    base = url.strip().rstrip("/")
    if base.endswith("/mcp"):
        base = base[: -len("/mcp")]
    return base if base.endswith(HOOK_PATH) else base + HOOK_PATH


def ask(url: str, body: bytes, token: str | None, timeout: float) -> str:
    """POST the hook JSON; the context the server would inject ("" for none).

    `timeout` bounds the whole exchange (connect, send and the complete answer), not each
    socket call: a server trickling a byte a second is given up on like a silent one. Only
    `hookSpecificOutput.additionalContext` is taken from the answer; the caller bounds it and
    writes its own output, so no other key (a "decision": "block", say) ever reaches Claude Code.

    Raises:
        RemoteFailed: a bad URL, connection refused, past the time, a status other than 200,
            or an answer that is neither empty nor a JSON object.
    """
    target = hook_url(url)
    found = _URL.match(target)
    if found is None:
        raise RemoteFailed(f"{url} is not an http:// or https:// URL.")
    scheme, host, port, path = found.groups()
    host = host.strip("[]")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    end = time.monotonic() + max(timeout, 0.05)
    try:
        if scheme == "https":
            status, answer = _https(host, int(port or 443), path, body, headers, end)
        else:
            status, answer = _http(host, int(port or 80), path, body, headers, end)
    except TimeoutError:
        raise RemoteFailed(
            f"{target} did not answer in full within {max(timeout, 0.05):.2f} s."
        ) from None
    except (OSError, ValueError) as exc:
        raise RemoteFailed(f"{target} did not answer ({exc}).") from None
    if status == 401:
        # Which server, and what to change; never the token itself.
        said = "refused the token in NOOA_TOKEN" if token else "needs a token and none was sent"
        raise RemoteFailed(
            f"{target} {said} (HTTP 401): set NOOA_TOKEN to a token from that server's tokens file."
        )
    if status != 200:
        raise RemoteFailed(f"{target} answered HTTP {status}.")
    text = answer.decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise RemoteFailed(f"{target} answered something that is not JSON.") from None
    if not isinstance(parsed, dict):
        raise RemoteFailed(f"{target} answered JSON that is not an object.")
    specific = parsed.get("hookSpecificOutput")
    context = specific.get("additionalContext") if isinstance(specific, dict) else None
    return context if isinstance(context, str) else ""


def _left(end: float) -> float:
    """Seconds before `end`; TimeoutError when none are left."""
    left = end - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _http(
    host: str, port: int, path: str, body: bytes, headers: dict[str, str], end: float
) -> tuple[int, bytes]:
    """One HTTP/1.1 POST with `Connection: close`; (status, body)."""
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host if ':' not in host else f'[{host}]'}:{port}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    with socket.create_connection((host, port), timeout=_left(end)) as conn:
        conn.settimeout(_left(end))
        conn.sendall(request)
        received = bytearray()
        while len(received) <= MAX_ANSWER + 16_384:
            conn.settimeout(_left(end))  # what is left of the whole exchange, per read
            chunk = conn.recv(65_536)
            if not chunk:
                break
            received += chunk
    head, sep, payload = bytes(received).partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("no complete HTTP response")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
    fields = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if "chunked" in fields.get("transfer-encoding", "").lower():
        payload = _unchunk(payload)
    elif "content-length" in fields:
        payload = payload[: int(fields["content-length"])]
    return int(parts[1]), payload[: MAX_ANSWER + 1]


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, sep, rest = data.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


def _https(
    host: str, port: int, path: str, body: bytes, headers: dict[str, str], end: float
) -> tuple[int, bytes]:
    import http.client

    connection = http.client.HTTPSConnection(host, port, timeout=_left(end))
    try:
        connection.request("POST", path, body=body, headers=headers)
        connection.sock.settimeout(_left(end))
        response = connection.getresponse()
        received = bytearray()
        while len(received) <= MAX_ANSWER:
            connection.sock.settimeout(_left(end))
            chunk = response.read1(65_536)
            if not chunk:
                break
            received += chunk
        return response.status, bytes(received[: MAX_ANSWER + 1])
    except http.client.HTTPException as exc:
        raise ValueError(str(exc)) from None
    finally:
        connection.close()
