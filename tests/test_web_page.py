"""The web page in a real browser: Debian chromium driven by Playwright against a live server."""

from pathlib import Path

import pytest

from gepard.api import TTS
from tests.test_server import live_server

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--autoplay-policy=no-user-gesture-required"]


def test_page_synthesizes_a_sentence_and_plays_the_chunks(tiny_lm_dir, tiny_codec_dir, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    tts = TTS.load(tiny_lm_dir, tiny_codec_dir, slots=2)
    server = live_server(tts, tmp_path / "data")
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.url)
            page.wait_for_selector("#voice option[value=default]", state="attached")
            page.fill("#text", "Hello there. See you at nine.")
            page.click("#speak")
            page.wait_for_function("gepard.done && gepard.chunks > 0 && gepard.played >= gepard.chunks",
                                   timeout=60_000)
            state = page.evaluate("({chunks: gepard.chunks, played: gepard.played, samples: gepard.samples})")
            stats = page.text_content("#stats")
            browser.close()
        assert state["chunks"] >= 1 and state["played"] == state["chunks"] and state["samples"] > 0
        assert "TTFA" in stats and "RTF" in stats and not errors
    finally:
        server.stop()
        tts.close()
