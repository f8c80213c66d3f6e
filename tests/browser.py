"""Drives idem serve's web page in headless Chromium (Debian's chromium,
through Playwright from PyPI), as a tenant would: a wrong token is refused,
the right one logs in, the run appears and finishes (the page refreshes
itself), its table's slice links to the run, and the run's page lays the
run out field by field within the window's width (no sideways scrolling;
a screenshot is saved). Prints what it saw as JSON.

usage: browser.py URL TOKEN RUN_ID SCREENSHOT [RELEASE_DIR]

With RELEASE_DIR, the run is held (a fault barrier) until the page has
shown it pending: the script then writes a file there, which lets it go.
"""
import os
import json
import sys
import time

from playwright.sync_api import sync_playwright

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def state_of(page, run_id):
    cell = page.locator(f'tr.run[data-id="{run_id}"] .state')
    try:
        return cell.inner_text(timeout=2000)
    except Exception:  # the page is reloading itself
        return None


def main() -> None:
    url, token, run_id, screenshot = sys.argv[1:5]
    release = sys.argv[5] if len(sys.argv) > 5 else None
    seen = {"states": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url + "/")
        page.fill("#token", "not-a-token")
        page.click("#login")
        seen["wrong_token_refused"] = "not valid" in page.content()
        page.fill("#token", token)
        page.click("#login")
        deadline = time.time() + 90
        while time.time() < deadline:
            s = state_of(page, run_id)
            if s and (not seen["states"] or seen["states"][-1] != s):
                seen["states"].append(s)
            if s in ("queued", "running") and release:
                os.makedirs(release, exist_ok=True)
                open(os.path.join(release, "browser"), "w").close()
                release = None
            if s in ("succeeded", "failed"):
                break
            time.sleep(0.3)
        page.reload()
        seen["audit"] = page.locator("td.audit").first.inner_text()
        # The table's slice links to the run that made its output.
        page.click(f'a.slice[href="/runs/{run_id}"]')
        seen["manifest"] = page.locator("#manifest").inner_text()
        for field in ("state", "result", "rows", "duration"):
            seen[field] = page.locator("#" + field).inner_text()
        seen["fields"] = page.locator("#run th").all_inner_texts()
        seen["page_width"] = page.evaluate("document.documentElement.scrollWidth")
        seen["window_width"] = page.evaluate("window.innerWidth")
        page.screenshot(path=screenshot, full_page=True)
        browser.close()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
