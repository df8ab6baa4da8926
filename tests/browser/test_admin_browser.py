"""A staff user in a real browser: the pages fit the screen, and a dead job is found, read and
requeued through the confirmation pages.

Runs headless Debian Chromium against pytest-django's live server, on the example project's
jobs only (seed.py). Screenshots go to a temporary folder, or to SQLQUEUE_SCREENSHOTS when it
is set: `scripts/test.sh --screenshots` sets it to docs/img to regenerate the ones
docs/admin.md shows.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job, Worker

from . import SQLITE_RUNS_ONLY
from .layout import (
    ATTEMPT_COLUMNS,
    clipped_columns,
    contrast_problems,
    history_layout,
    horizontal_overflow,
    row_heights,
    visible_characters,
)
from .seed import FAILED_ERROR, Seeded, seed_queue

PASSWORD = "browser-test-password"
#: Where docs/admin.md's screenshots are taken: a common laptop screen.
WIDTH = 1366
SCREENS = [(1280, 800), (1366, 768), (1920, 1080)]
#: The least width of the error column, in px, beside Django's open sidebar.
MIN_ERROR_WIDTH = {1280: 80, 1366: 100, 1920: 100}
#: Where the last error must be readable, beside Django's sidebar and the filters.
ERROR_SCREENS = [(1024, 768), (1366, 768), (1920, 1080)]
#: The least number of characters of a failed job's error the list shows.
MIN_ERROR_CHARACTERS = 60

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, SQLITE_RUNS_ONLY]


def wait_for(browser: Any, condition: Any, timeout: float = 15) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(condition)


def find(browser: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, css)


def find_all(browser: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, css)


def open_page(browser: Any, url: str) -> None:
    browser.get(url)
    wait_for(browser, lambda b: b.execute_script("return document.readyState") == "complete")


def screenshot(browser: Any, folder: Path, name: str, width: int = WIDTH) -> Path:
    """The whole page, not just the window: grow the window to the page's height first."""
    browser.set_window_size(width, 4000)  # lay the page out at its full height first
    height = browser.execute_script(
        "window.scrollTo(0, 0);"
        "const filter = document.querySelector('#changelist-filter');"
        "const bottom = filter ? filter.getBoundingClientRect().bottom + 24 : 0;"
        "const main = document.querySelector('#content');"
        "const end = main ? main.getBoundingClientRect().bottom + 40 : 0;"
        "return Math.max(bottom, end, 700);"
    )
    # The window's height includes a little browser chrome above the page.
    chrome = browser.execute_script("return window.outerHeight - window.innerHeight") or 0
    browser.set_window_size(width, min(int(height) + int(chrome), 4000))
    path = folder / name
    assert browser.save_screenshot(str(path)), path
    browser.set_window_size(width, 900)
    return path


def listed_rows(browser: Any) -> dict[int, str]:
    """Job id → status shown in its badge, for every row on screen."""
    rows = {}
    for row in find_all(browser, "#result_list tbody tr"):
        job_id = int(row.find_element("css selector", "th.field-id a").text)
        rows[job_id] = row.find_element("css selector", ".sq-badge").get_attribute("data-status")
    return rows


def messages_on_screen(browser: Any) -> list[str]:
    return [item.text for item in find_all(browser, "ul.messagelist li")]


def choose_action(browser: Any, action: str) -> None:
    from selenium.webdriver.support.select import Select

    Select(find(browser, "select[name=action]")).select_by_value(action)
    find(browser, "button[name=index]").click()


def confirm(browser: Any, button: str) -> None:
    """On a confirmation page: check it lists the jobs, then press its "Yes" button."""
    wait_for(browser, lambda b: find_all(b, "body.sq-confirm"))
    find(browser, f"input[type=submit][value='{button}']").click()
    wait_for(browser, lambda b: messages_on_screen(b))


@pytest.fixture
def staff_user(transactional_db: None) -> User:
    user = User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    codenames = ["view_job", "change_job", "delete_job", "view_worker"]
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_sqlqueue", codename__in=codenames)
    )
    return user


@pytest.fixture
def seeded(example_jobs: list[str], settings: Any) -> Seeded:
    # Production-like heartbeats (the test settings use 1s): stale after 30s, not 3s.
    settings.SQLQUEUE = {**settings.SQLQUEUE, "LEASE_SECONDS": 60, "HEARTBEAT_SECONDS": 10}
    return seed_queue()


def log_in(browser: Any, live_server: Any, user: User, next_url: str, theme: str = "") -> None:
    """Log in; Django's navigation sidebar stays open, as a new user first sees it. The live
    pages refresh themselves once an hour, not every 5 seconds, so that they hold still while
    a test reads them (test_live_browser.py sets its own period)."""
    open_page(browser, f"{live_server.url}{reverse('admin:login')}?next={next_url}")
    browser.execute_script("localStorage.setItem('django_sqlqueue.live.seconds', '3600')")
    find(browser, "#id_username").send_keys(user.username)
    find(browser, "#id_password").send_keys(PASSWORD)
    find(browser, "#login-form input[type=submit]").click()
    wait_for(browser, lambda b: next_url in b.current_url)
    if theme:
        browser.execute_script(f"localStorage.setItem('theme', '{theme}')")
        open_page(browser, live_server.url + next_url)


@pytest.mark.parametrize(("width", "height"), SCREENS, ids=[f"{w}x{h}" for w, h in SCREENS])
def test_pages_fit_the_screen(
    browser, live_server, staff_user, seeded, screenshots, tmp_path, width, height
):
    """At 1280x800, 1366x768 and 1920x1080, beside Django's sidebar and the filters, in the
    light and the dark theme: no sideways scrolling, every column of the job list, the
    attempts and the workers in view, and coloured text that stands out from its background.

    Its screenshots (what the window shows) go to the test's temporary folder, but for the
    dark job list that docs/admin.md shows.
    """
    browser.set_window_size(width, height)
    job_list = reverse("admin:django_sqlqueue_job_changelist")
    log_in(browser, live_server, staff_user, job_list)
    for theme in ("light", "dark"):
        browser.execute_script(f"localStorage.setItem('theme', '{theme}')")
        check_pages_fit(browser, live_server.url, seeded, theme, tmp_path, screenshots)


def check_pages_fit(
    browser: Any, base: str, seeded: Seeded, theme: str, folder: Path, docs: Path
) -> None:
    width = browser.get_window_size()["width"]
    name = f"{width}-{theme}"

    # The job list: Finished (with the duration) and Last error in view, rows one line high.
    open_page(browser, base + reverse("admin:django_sqlqueue_job_changelist"))
    assert browser.execute_script("return document.documentElement.dataset.theme") == theme
    assert find(browser, "#nav-sidebar").is_displayed()
    assert horizontal_overflow(browser) == {}
    error = find(browser, "#result_list thead th.column-error_column")
    # The error in its column (wide screens) or on a line of its own under its row.
    under_row = not error.is_displayed()
    if under_row:
        assert width < 1700, width
        assert clipped_columns(browser, "#result_list") == ["column-error_column"]
    else:
        assert clipped_columns(browser, "#result_list") == []
        assert error.text.strip().lower() == "last error"
        assert error.size["width"] >= MIN_ERROR_WIDTH[width], error.size
    check_error_readable(browser, seeded)
    failed_row = find(browser, f"#result_list input[value='{seeded.failed.pk}']")
    failed_error = failed_row.find_element("xpath", "ancestor::tr").find_element(
        "css selector", ".sq-error-line"
    )
    assert "SMTPServerDisconnected" in failed_error.text
    # The same error on a job that completed since: an earlier attempt's, not in red.
    retried_row = find(browser, f"#result_list input[value='{seeded.retried.pk}']")
    retried_cells = retried_row.find_element("xpath", "ancestor::tr")
    old_error = retried_cells.find_element("css selector", ".sq-error-line.sq-error-old")
    assert "SMTPServerDisconnected" in old_error.text
    assert old_error.value_of_css_property("color") != failed_error.value_of_css_property("color")
    assert (
        "took 4.2 ms" in retried_cells.find_element("css selector", "td.field-finished_column").text
    )
    # Rows are as tall as those without an error; under the row, the error adds one line.
    heights = row_heights(browser)
    line = failed_error.size["height"] if under_row else 0
    assert line <= 20, failed_error.size
    assert max(heights["error"]) <= max(heights["no error"]) + line + 2, heights
    assert "took" in find(browser, "#result_list td.field-finished_column").text
    assert contrast_problems(browser) == []
    browser.save_screenshot(str(folder / f"fit-list-{name}.png"))
    if name == f"{WIDTH}-dark":
        size = browser.get_window_size()
        screenshot(browser, docs, "admin-job-list-dark.png")
        browser.set_window_size(size["width"], size["height"])

    # A job page with two runs of attempts, every traceback open.
    open_page(
        browser, base + reverse("admin:django_sqlqueue_job_change", args=[seeded.dead_recent.pk])
    )
    closed = history_layout(browser)
    for summary in find_all(browser, "details.sq-traceback summary"):
        summary.click()
    opened = history_layout(browser)
    assert opened["headers"] == ATTEMPT_COLUMNS
    assert opened["overflow"] == 0 and opened["clipped"] == [], opened
    # Opening a traceback leaves #, outcome and worker where they were (within a few pixels).
    moved = [abs(a - b) for a, b in zip(opened["lefts"][:3], closed["lefts"][:3], strict=True)]
    assert max(moved) <= 4, (closed, opened)
    assert horizontal_overflow(browser) == {}
    assert contrast_problems(browser) == []
    browser.execute_script("document.querySelector('.sq-history').scrollIntoView()")
    browser.save_screenshot(str(folder / f"fit-attempts-{name}.png"))

    # The workers: "Jobs done" in view.
    open_page(browser, base + reverse("admin:django_sqlqueue_worker_changelist"))
    assert horizontal_overflow(browser) == {}
    assert clipped_columns(browser, "#result_list") == []
    assert find(browser, "#result_list th.column-jobs_done").text.strip().lower() == "jobs done"
    browser.save_screenshot(str(folder / f"fit-workers-{name}.png"))


def failed_error_line(browser: Any, seeded: Seeded) -> Any:
    """The failed job's error, as its row in the job list shows it."""
    checkbox = find(browser, f"#result_list input[value='{seeded.failed.pk}']")
    row = checkbox.find_element("xpath", "ancestor::tr")
    return row.find_element("css selector", ".sq-error-line")


def check_error_readable(browser: Any, seeded: Seeded) -> None:
    """The failed job's last error: at least MIN_ERROR_CHARACTERS of it on screen, in a
    colour that stands out, and all of it on hover."""
    line = failed_error_line(browser, seeded)
    assert line.text.startswith("SMTPServerDisconnected: Connection unexpectedly closed")
    assert line.get_attribute("title") == FAILED_ERROR
    shown = visible_characters(browser, line)
    assert shown >= MIN_ERROR_CHARACTERS, (shown, line.size)
    assert contrast_problems(browser) == []


@pytest.mark.parametrize(
    ("width", "height"), ERROR_SCREENS, ids=[f"{w}x{h}" for w, h in ERROR_SCREENS]
)
def test_the_last_error_is_readable(
    browser, live_server, staff_user, seeded, tmp_path, width, height
):
    """At 1024, 1366 and 1920 px, beside Django's sidebar and the filters, in the light and
    the dark theme, a failed job's error shows at least 60 characters, all of it on hover."""
    browser.set_window_size(width, height)
    job_list = reverse("admin:django_sqlqueue_job_changelist")
    log_in(browser, live_server, staff_user, job_list)
    for theme in ("light", "dark"):
        browser.execute_script(f"localStorage.setItem('theme', '{theme}')")
        open_page(browser, live_server.url + job_list)
        assert browser.execute_script("return document.documentElement.dataset.theme") == theme
        assert find(browser, "#nav-sidebar").is_displayed()
        assert find(browser, "#changelist-filter").is_displayed()
        check_error_readable(browser, seeded)
        browser.save_screenshot(str(tmp_path / f"error-{width}-{theme}.png"))


def test_staff_filters_reads_and_requeues_a_dead_job(
    browser, live_server, staff_user, seeded, screenshots
):
    browser.set_window_size(WIDTH, 900)
    job_list = reverse("admin:django_sqlqueue_job_changelist")
    log_in(browser, live_server, staff_user, job_list, "light")

    # The list, with its summary bar; the name filter offers the example's jobs only.
    summary = find(browser, ".sq-summary").text
    assert "Dead" in summary and "Oldest due pending job" in summary
    assert find(browser, "link[href$='django_sqlqueue/admin.css']")
    names = [a.text for a in find_all(browser, "#changelist-filter a[href*='?name=']")]
    assert names == ["shop.build_sales_report", "shop.send_welcome_email", "shop.sync_inventory"]
    screenshot(browser, screenshots, "admin-job-list.png")

    # Filter by status: the sidebar's "Dead".
    find(browser, "#changelist-filter a[href='?status__exact=dead']").click()
    wait_for(browser, lambda b: "status__exact=dead" in b.current_url)
    dead = {seeded.dead_recent.pk, seeded.dead_recent_other.pk, seeded.dead_old.pk}
    assert listed_rows(browser) == dict.fromkeys(dead, "dead")

    # And a date range on "created": the last two days leave out the 12-day-old job.
    today = timezone.localdate()
    form = find(browser, "form#created-form")
    form.find_element("name", "created_at__range__gte").send_keys(
        (today - timedelta(days=1)).isoformat()
    )
    form.find_element("name", "created_at__range__lte").send_keys(
        (today + timedelta(days=1)).isoformat()
    )
    form.find_element("css selector", "input[type=submit]").click()
    wait_for(browser, lambda b: "created_at__range__gte" in b.current_url)
    assert "status__exact=dead" in browser.current_url
    assert set(listed_rows(browser)) == {seeded.dead_recent.pk, seeded.dead_recent_other.pk}

    # Requeue one of them from the list: tick it, pick the action, confirm.
    target = seeded.dead_recent_other
    find(browser, f"input.action-select[value='{target.pk}']").click()
    choose_action(browser, "requeue_selected")
    wait_for(browser, lambda b: find_all(b, ".sq-confirm-list"))
    assert Job.objects.get(pk=target.pk).status == "dead"  # nothing happens before "Yes"
    confirm(browser, "Yes, requeue")
    assert messages_on_screen(browser) == ["Requeued 1 job."]
    # The list is still filtered on dead jobs: the requeued one has left it.
    assert set(listed_rows(browser)) == {seeded.dead_recent.pk}
    assert Job.objects.get(pk=target.pk).status == "pending"

    # Read the other dead job: its payload, both runs of attempts and a traceback.
    find(browser, f"#result_list th.field-id a[href*='/{seeded.dead_recent.pk}/']").click()
    wait_for(browser, lambda b: f"/{seeded.dead_recent.pk}/change/" in b.current_url)
    page = find(browser, "#content").text
    assert "TEA-EARLGREY-250" in page and "sync-TEA-EARLGREY-250-2026-11" in page
    numbers = [td.text for td in find_all(browser, "tr.sq-attempt td.sq-attempt-number")]
    assert numbers == ["1", "2", "3", "4", "5", "6"]
    assert "run 2 starts here" in find(browser, "tr.sq-run").text
    assert "6 attempts in all, over 2 runs" in find(browser, ".field-attempts_display").text
    find(browser, "details.sq-traceback summary").click()
    assert "SupplierUnavailable" in find(browser, "details.sq-traceback pre").text
    screenshot(browser, screenshots, "admin-job-detail.png")

    # Requeue it with the page's button: a confirmation page, then the job is pending.
    find(browser, "a.sq-tool-requeue").click()
    confirm(browser, "Yes, requeue")
    assert messages_on_screen(browser) == ["Requeued 1 job."]
    assert find(browser, ".field-status_badge .sq-badge").text == "Pending"
    assert "0 / 3" in find(browser, ".field-attempts_display .readonly").text
    assert not find_all(browser, "a.sq-tool-requeue")  # a pending job: nothing to requeue

    # Cancel two pending jobs, a running one and a dead one: a confirmation page first (the
    # dead one will be skipped, the running one is asked to stop), then a message
    # saying what happened to each.
    chosen = [*seeded.pending[:2], seeded.running, seeded.dead_old]
    open_page(browser, f"{live_server.url}{job_list}")
    for job in chosen:
        find(browser, f"input.action-select[value='{job.pk}']").click()
    choose_action(browser, "cancel_selected")
    wait_for(browser, lambda b: find_all(b, ".sq-confirm-list"))
    assert "Running jobs are asked to stop" in find(browser, "#content").text
    assert len(find_all(browser, ".sq-confirm-list li.sq-skip")) == 1  # the dead one
    screenshot(browser, screenshots, "admin-cancel-confirm.png")
    confirm(browser, "Yes, cancel")
    [message] = messages_on_screen(browser)
    assert message.startswith("Cancelled 3 of 4 selected jobs. Skipped 1 job whose status")
    assert listed_rows(browser)[seeded.pending[0].pk] == "cancelled"
    assert listed_rows(browser)[seeded.running.pk] == "running"  # until its worker stops it

    # The workers panel: the stale worker is marked, the busy one links to its job. The two
    # live workers beat again now, as real ones would have while the test clicked around.
    Worker.objects.filter(hostname="web-1").update(last_seen_at=timezone.now())
    open_page(browser, live_server.url + reverse("admin:django_sqlqueue_worker_changelist"))
    assert len(find_all(browser, ".sq-badge.sq-dead")) == 1  # "stale"
    assert (
        find(browser, f"a[href$='/job/{seeded.running.pk}/change/']").text
        == f"job #{seeded.running.pk}"
    )
    screenshot(browser, screenshots, "admin-workers.png")
