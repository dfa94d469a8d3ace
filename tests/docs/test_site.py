"""The docs site builds strictly and every page loads in a real browser, clean."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Chromium as root on a machine with no network but loopback: without the
background-networking flags it tries (and fails) to reach its own services."""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def pages(site: Path) -> list[str]:
    """Every HTML page of the site, as a path below its root."""
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html"))


def test_site_has_the_reference_pages(site: Path) -> None:
    found = set(pages(site))
    for page in ("reference/cli", "reference/configuration", "reference/metrics"):
        assert f"{page}/index.html" in found


TABS = 4
"""Pages loaded at once, each in a tab of its own: a page counts as loaded once its
network has been idle for 500 ms (Playwright's `networkidle`), and those half
seconds pass side by side."""


def test_every_page_loads_without_errors(site: Path, served: str) -> None:
    from playwright.sync_api import (
        ConsoleMessage,
        Page,
        Request,
        Response,
        sync_playwright,
    )

    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)

        def tab() -> tuple[Page, list[str]]:
            page, current = browser.new_page(), [""]
            owner: dict[Request, str] = {}  # the path each request was made for

            def problem(text: str) -> None:
                problems.append(f"{current[0]}: {text}")

            def console(message: ConsoleMessage) -> None:
                if message.type == "error":
                    problem(f"console: {message.text}")

            def response(answer: Response) -> None:
                if answer.status >= 400:
                    problem(f"{answer.status}: {answer.url}")

            page.on("pageerror", lambda e: problem(f"script: {e}"))
            page.on("console", console)

            def failed(request: Request) -> None:
                # The tab's next page cancels what its last one still fetched (a
                # favicon after the load): that abort is the navigation's own.
                made_for = owner.pop(request, current[0])
                if made_for == current[0] or request.failure != "net::ERR_ABORTED":
                    problems.append(
                        f"{made_for}: failed: {request.url} {request.failure}"
                    )

            def finished(request: Request) -> None:
                owner.pop(request, None)

            page.on("request", lambda r: owner.__setitem__(r, current[0]))
            page.on("requestfinished", finished)
            page.on("requestfailed", failed)
            page.on("response", response)
            return page, current

        tabs = [tab() for _ in range(TABS)]
        paths = [path for path in pages(site) if path != "404.html"]
        loaded = 0
        for first in range(0, len(paths), TABS):
            batch = list(zip(tabs, paths[first : first + TABS], strict=False))
            for (page, current), path in batch:
                current[0] = path
                page.goto(f"{served}/{path}", wait_until="commit")
            for (page, _), path in batch:
                page.wait_for_load_state("networkidle")
                broken = page.evaluate(
                    "[...document.images]"
                    ".filter(i => !i.complete || i.naturalWidth === 0)"
                    ".map(i => i.src)"
                )
                problems += [f"{path}: image not shown: {src}" for src in broken]
                stylesheets = page.evaluate("document.styleSheets.length")
                if not stylesheets:
                    problems.append(f"{path}: no stylesheet applied")
                loaded += 1
        browser.close()
    assert loaded >= 5
    assert not problems, "\n".join(problems)
