"""The web console in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromedriver (nothing downloaded). Alice signs in, sees her job go from Idle to Completed
on its page without a reload, holds and releases another from the queue page, and is refused
bob's job. The main pages are photographed on the way (to docs/web/ when
GRIDBUS_WEB_SCREENSHOTS names that directory, else to the test's own)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gridbus.console.schedd import Schedd
from gridbus.submit import Submit
from tests.e2e.pool import wait_for
from tests.e2e.web.conftest import WebPool

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip("Debian's chromium and chromium-driver are not installed (make test installs them as root: "
                "scripts/ensure-browser.sh)", allow_module_level=True)

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402 - after the skip above
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# Records every status the job page shows, from the page itself: the view is redrawn in place
# when the stream says the job changed, so the list is what a person watching would have seen.
WATCH_STATUS = """
window.__seen = [];
const note = () => { const s = document.querySelector('#job-status');
  if (s && window.__seen[window.__seen.length - 1] !== s.textContent) window.__seen.push(s.textContent); };
new MutationObserver(note).observe(document.querySelector('#view'), {childList: true, subtree: true});
note();
"""


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1100,720", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def shots_dir(tmp_path: Path) -> Path:
    wanted = os.environ.get("GRIDBUS_WEB_SCREENSHOTS")
    path = Path(wanted) if wanted else tmp_path / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def submit(pool: WebPool, who: str, args: str, exe: str = "/bin/sleep") -> str:
    with Schedd(url=pool.user_url(who)) as schedd:
        result = schedd.submit(Submit({"executable": exe, "arguments": args, "should_transfer_files": "NO"}))
    return f"{result.cluster()}.0"


def status_of(pool: WebPool, who: str, job: str) -> int:
    with Schedd(url=pool.user_url(who)) as schedd:
        ads = schedd.query(f"ClusterId == {job.split('.')[0]}", ["JobStatus"]) or \
            schedd.history(f"ClusterId == {job.split('.')[0]}", ["JobStatus"], 1)
    return int(ads[0]["JobStatus"]) if ads else 0


def click(wait: WebDriverWait, css: str) -> None:
    """Click the element ``css`` names; the view may be redrawn (a change came) between finding
    the element and clicking it, so a stale one is looked up again."""
    def attempt(d) -> bool:
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    wait.until(attempt)


def test_sign_in_watch_act_and_be_refused(web_pool: WebPool, browser, tmp_path: Path):
    b = browser
    wait = WebDriverWait(browser, 40, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,))
    shots = shots_dir(tmp_path)
    alice, alice_password = web_pool.users["alice"]

    # A wrong password is the broker's refusal; the right one signs in.
    b.get(web_pool.url)
    wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
    b.find_element(By.ID, "login-user").send_keys(alice)
    b.find_element(By.ID, "login-password").send_keys("not-" + alice_password)
    b.find_element(By.ID, "login-submit").click()
    wait.until(lambda d: "refused" in d.find_element(By.ID, "message").text)
    b.find_element(By.ID, "login-password").clear()
    b.find_element(By.ID, "login-password").send_keys(alice_password)
    b.find_element(By.ID, "login-submit").click()
    wait.until(lambda d: alice in d.find_element(By.ID, "who").text)
    b.execute_script("window.__notReloaded = true;")

    # One cpu: a job of a few seconds holds it, so the next one stays Idle meanwhile.
    blocker = submit(web_pool, "alice", "4")
    wait_for("the first job running", lambda: status_of(web_pool, "alice", blocker) == 2, 30)
    job = submit(web_pool, "alice", "", exe="/bin/true")
    b.execute_script(f"location.hash = '#job?id={job}';")
    wait.until(lambda d: d.find_element(By.ID, "job-status").text == "Idle")
    b.execute_script(WATCH_STATUS)
    wait.until(lambda d: d.execute_script("return window.__seen.includes('Completed')"))
    seen = b.execute_script("return window.__seen")
    assert seen[0] == "Idle" and seen[-1] == "Completed", seen
    assert b.execute_script("return window.__notReloaded === true"), "the page was reloaded"
    # Its events since the page showed it, as the schedd published them (the ad may say Completed
    # a moment before the last comes).
    # (Read inside the wait: the list may be redrawn between finding its rows and reading them,
    # and a stale row is read again.)
    def event_names(d) -> list[str] | None:
        names = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#events .event")]
        return names if "terminated" in names else None

    events = wait.until(event_names)
    assert events[-2:] == ["execute", "terminated"], events
    b.save_screenshot(str(shots / "job.png"))

    # Hold and release from the queue page; its rows change as the events come.
    running = submit(web_pool, "alice", "60")
    b.execute_script("location.hash = '#queue';")
    cell = f"td.status[data-job='{running}']"
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, cell))
    click(wait, f"button[data-action='hold'][data-job='{running}']")
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, cell).text.startswith("Held"))
    b.save_screenshot(str(shots / "queue.png"))
    assert status_of(web_pool, "alice", running) == 5
    click(wait, f"button[data-action='release'][data-job='{running}']")
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, cell).text in ("Idle", "Running"))
    assert status_of(web_pool, "alice", running) in (1, 2)
    assert b.execute_script("return window.__notReloaded === true"), "the page was reloaded"

    # Bob's job: alice may look at it (as condor_q shows every queue) but the schedd refuses her hold.
    bobs = submit(web_pool, "bob", "60")
    b.execute_script(f"location.hash = '#job?id={bobs}';")
    wait.until(lambda d: d.find_elements(By.ID, "job-status"))
    click(wait, "button[data-action='hold']")
    wait.until(lambda d: "may not hold" in d.find_element(By.ID, "message").text)
    assert "error" in (b.find_element(By.ID, "message").get_attribute("class") or "")
    assert status_of(web_pool, "bob", bobs) in (1, 2)

    for page in ("slots", "users", "daemons"):
        b.execute_script(f"location.hash = '#{page}';")
        wait.until(lambda d, page=page: d.find_elements(By.CSS_SELECTOR, "#view table")
                   and page.lower() in d.find_element(By.CSS_SELECTOR, "#view h1").text.lower())
        b.save_screenshot(str(shots / f"{page}.png"))
    # The remaining jobs go, so the module's pool is left empty.
    b.execute_script("location.hash = '#queue';")
    click(wait, f"button[data-action='remove'][data-job='{running}']")
    wait.until(lambda d: "remove" in d.find_element(By.ID, "message").text)
    with Schedd(url=web_pool.user_url("bob")) as schedd_of_bob:
        schedd_of_bob.act(3, bobs)  # JobAction.Remove
