"""Realistic web access logs in nginx's combined format, from a fixed seed.

    203.0.113.7 - - [22/Nov/2026:10:15:32 +0000] "GET /products/42 HTTP/1.1" 200 5123
        "https://shop.example/" "Mozilla/5.0 ..."      (one line)

Traffic follows Poisson arrivals with a busy spell, paths and clients are
Zipf-distributed (a few hot pages and heavy clients, a long tail), static
assets answer 304 when cached, unknown URLs 404, and an incident makes the
checkout and its API fail with 5xx for a few minutes.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

START = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)

AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (Linux; Android 15; Pixel 9) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Mobile Safari/537.36",
    "curl/8.10.1",
    "Googlebot/2.1 (+http://www.google.com/bot.html)",
    "python-requests/2.32.3",
]
REFERERS = [
    "-",
    "https://shop.example/",
    "https://www.google.com/",
    "https://shop.example/search?q=lamp",
    "https://news.example/review",
    "https://shop.example/cart",
]
CATEGORIES = ["lamps", "chairs", "tables", "rugs", "mirrors", "beds", "sofas", "shelves", "desks", "plants"]
QUERIES = ["lamp", "oak table", "blue rug", "desk chair", "mirror round", "plant pot", "sofa bed"]
STATIC = ["/static/app.js", "/static/app.css", "/static/logo.svg", "/favicon.ico", "/static/fonts/inter.woff2"]


@dataclass(frozen=True)
class Request:
    timestamp_ms: int
    client: str
    line: str


def _paths(rng: random.Random) -> list[tuple[str, str]]:
    """(method, path) pairs ranked from the hottest down."""
    paths = [
        ("GET", "/"),
        ("GET", "/cart"),
        ("POST", "/checkout"),
        ("GET", "/checkout"),
        ("GET", "/login"),
        ("POST", "/api/v1/cart/items"),
        ("POST", "/api/v1/payments"),
    ]
    paths += [("GET", f"/category/{c}") for c in CATEGORIES]
    paths += [("GET", f"/search?q={q.replace(' ', '+')}") for q in QUERIES]
    paths += [("GET", p) for p in STATIC]
    paths += [("GET", f"/products/{i}") for i in rng.sample(range(1, 5000), 250)]
    paths += [("GET", f"/api/v1/items/{i}") for i in rng.sample(range(1, 5000), 80)]
    return paths


def _zipf_cumulative(n: int, s: float) -> list[float]:
    """Cumulative Zipf weights, so each draw is a bisection rather than a sum."""
    return list(itertools.accumulate(1 / (rank**s) for rank in range(1, n + 1)))


def generate(minutes: int = 20, rate_per_s: float = 250.0, seed: int = 7) -> Iterator[Request]:
    """Requests in time order: ``minutes`` of traffic at about ``rate_per_s`` on average."""
    rng = random.Random(seed)
    paths = _paths(rng)
    path_weights = _zipf_cumulative(len(paths), 1.1)
    clients = [
        f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        for _ in range(3000)
    ]
    client_weights = _zipf_cumulative(len(clients), 0.9)
    agent_of = {c: rng.choice(AGENTS) for c in clients}
    incident = (7 * 60, 10 * 60)  # seconds into the run: checkout fails
    t, end = 0.0, minutes * 60.0
    while t < end:
        busy = 1.8 if 12 * 60 <= t < 15 * 60 else 1.0
        t += rng.expovariate(rate_per_s * busy)
        if t >= end:
            break
        client = rng.choices(clients, cum_weights=client_weights)[0]
        method, path = rng.choices(paths, cum_weights=path_weights)[0]
        if rng.random() < 0.01:
            method, path = "GET", f"/products/{rng.randrange(5000, 9999)}"  # stale links: 404
        status, size = _answer(rng, method, path, incident[0] <= t < incident[1])
        when = START + dt.timedelta(seconds=t)
        stamp = when.strftime("%d/%b/%Y:%H:%M:%S +0000")
        line = (
            f'{client} - - [{stamp}] "{method} {path} HTTP/1.1" {status} {size} '
            f'"{rng.choice(REFERERS)}" "{agent_of[client]}"'
        )
        yield Request(int(when.timestamp() * 1000), client, line)


def _answer(rng: random.Random, method: str, path: str, incident: bool) -> tuple[int, int]:
    if path.startswith("/products/") and int(path.rsplit("/", 1)[1]) >= 5000:
        return 404, 153
    if incident and ("checkout" in path or "payments" in path) and rng.random() < 0.6:
        return rng.choice((500, 502, 503)), 0
    if path in STATIC or path == "/favicon.ico":
        return (304, 0) if rng.random() < 0.7 else (200, rng.randrange(2_000, 90_000))
    roll = rng.random()
    if roll < 0.002:
        return 500, 0
    if roll < 0.01:
        return (401 if path == "/login" else 400), 120
    if method == "POST":
        return (201 if "api" in path else 302), rng.randrange(50, 400)
    return 200, rng.randrange(1_500, 40_000)
