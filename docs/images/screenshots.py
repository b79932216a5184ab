"""Regenerate the attention page's screenshots in docs/images/ (docs/serving.md shows them).

    python docs/images/screenshots.py TRANSFORMER_RUN

serves the shipped demo model (recurrent: a bi-GRU encoder, Luong's decoder) and
TRANSFORMER_RUN as `transformer` with a real `attncli serve` on a free loopback port,
opens its page in headless Chromium (Debian's `chromium`, driven by Playwright) and
writes, over the reference and gold links below:

    page-recurrent-375.png, page-recurrent-1280.png      the demo, words view
    page-transformer-375.png, page-transformer-1280.png  the Transformer, words view
    page-transformer-tokens-1280.png  its decoder self-attention, token view, a walk
    page-transformer-overview-1280.png  its cross-attention's every layer and head,
                                        tokens, layer 1 head 2 chosen (the attention
                                        panel alone)

each at the width in its name (the whole page's height), with a cell's read-out shown
(none over the overview).
The Transformer of the pictures is `configs/transformer.yaml` with subword
vocabularies, trained for eight minutes:

    attncli train transformer --run-dir RUN --set data.source.level=subword \\
        --set data.target.level=subword --set data.source.vocab_size=3000 \\
        --set data.target.vocab_size=3000 --set data.valid_size=500 \\
        --set training.eval_sentences=100 --set training.max_minutes=8

Options: --out DIR (default: this script's folder), --chromium PATH (default
/usr/bin/chromium).
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SENTENCE = "Tengo hambre, amigo."
REFERENCE = "I'm really hungry, my friend."
GOLD = "1-1 1p2 2-3 3-5 3p4"  # Tengo-I'm, Tengo-really (possible), hambre-hungry, ...
ARGUMENTS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync"]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(transformer):
    """`attncli serve demo --model transformer=TRANSFORMER` started: (process, its URL)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "attncli", "serve", "demo", "--model",
         f"transformer={transformer}", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"attncli serve ended: {process.stderr.read()}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return process, url
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    process.send_signal(signal.SIGTERM)
    sys.exit("attncli serve was not ready after 10 minutes")


def inspect_reference(tab, url, model):
    """The page of `url`, the sentence sent with its reference and gold links to
    `model`: it opens on the attention over the reference, in words."""
    tab.goto(f"{url}/")
    tab.wait_for_selector("#model option", state="attached")
    tab.select_option("#model", model)
    tab.fill("#texts", SENTENCE)
    tab.fill("#references", REFERENCE)
    tab.fill("#golds", GOLD)
    tab.click("#submit")
    tab.wait_for_selector("[data-heatmap]")
    tab.wait_for_selector("#busy", state="hidden")


def read_out(tab, row, column):
    """The read-out of cell (`row`, `column`), as the pointer on it shows it."""
    tab.hover(f'.cell[data-row="{row}"][data-column="{column}"]')


def shoot(tab, path, part=None):
    """The whole page, or its element `part` (a selector), as the PNG `path`."""
    if part is None:
        tab.screenshot(path=path, full_page=True)
    else:
        tab.locator(part).screenshot(path=path)
    print(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("transformer", help="a Transformer run (or model) directory")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    arguments = parser.parse_args()

    from playwright.sync_api import sync_playwright

    process, url = serve(arguments.transformer)
    out = arguments.out
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=arguments.chromium,
                                                 args=ARGUMENTS)
            for width in (375, 1280):
                tab = browser.new_page(viewport={"width": width, "height": 900})
                for model, name in (("demo", "recurrent"), ("transformer", "transformer")):
                    inspect_reference(tab, url, model)
                    read_out(tab, 2, 1)  # hungry → hambre,
                    shoot(tab, out / f"page-{name}-{width}.png")
                tab.close()
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            inspect_reference(tab, url, "transformer")
            tab.click("#words")  # tokens
            tab.select_option("#attention-kind", "decoder")
            tab.click('.row-label[data-row="2"]')
            tab.wait_for_selector('#walk[data-step="3"]:not([hidden])')
            read_out(tab, 2, 1)
            shoot(tab, out / "page-transformer-tokens-1280.png")
            inspect_reference(tab, url, "transformer")
            tab.click("#words")
            tab.click('.thumbnail[data-layer="1"][data-head="2"]')
            tab.mouse.move(0, 0)
            shoot(tab, out / "page-transformer-overview-1280.png", "#attention")
            browser.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


if __name__ == "__main__":
    main()
