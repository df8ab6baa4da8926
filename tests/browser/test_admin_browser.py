"""A staff user in a real browser: find a dead job by status and date, read it, requeue it.

Runs headless Debian Chromium against pytest-django's live server and saves the screenshots
docs/admin.md shows (SQLQUEUE_SCREENSHOTS=<dir> to write them elsewhere).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job, Worker

from .seed import seed_queue

SCREENSHOTS = Path(
    os.environ.get("SQLQUEUE_SCREENSHOTS", Path(__file__).resolve().parents[2] / "docs" / "img")
)
PASSWORD = "browser-test-password"
WIDTH = 1600

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


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


def screenshot(browser: Any, name: str) -> Path:
    """The whole page, not just the window: grow the window to the page's height first."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.set_window_size(WIDTH, 4000)  # lay the page out at its full height first
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
    browser.set_window_size(WIDTH, min(int(height) + int(chrome), 4000))
    path = SCREENSHOTS / name
    assert browser.save_screenshot(str(path)), path
    browser.set_window_size(WIDTH, 1000)
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


@pytest.fixture
def staff_user(transactional_db: None) -> User:
    user = User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    codenames = ["view_job", "change_job", "delete_job", "view_worker"]
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_sqlqueue", codename__in=codenames)
    )
    return user


def log_in(browser: Any, live_server: Any, user: User, next_url: str) -> None:
    open_page(browser, f"{live_server.url}{reverse('admin:login')}?next={next_url}")
    find(browser, "#id_username").send_keys(user.username)
    find(browser, "#id_password").send_keys(PASSWORD)
    find(browser, "#login-form input[type=submit]").click()
    wait_for(browser, lambda b: next_url in b.current_url)
    # Collapse Django's navigation sidebar: the job table gets the width.
    browser.execute_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    open_page(browser, live_server.url + next_url)


def test_staff_filters_reads_and_requeues_a_dead_job(browser, live_server, staff_user, settings):
    # Production-like heartbeats (the test settings use 1s): stale after 30s, not 3s.
    settings.SQLQUEUE = {**settings.SQLQUEUE, "LEASE_SECONDS": 60, "HEARTBEAT_SECONDS": 10}
    seeded = seed_queue()
    job_list = reverse("admin:django_sqlqueue_job_changelist")
    log_in(browser, live_server, staff_user, job_list)

    # The list, with its summary bar.
    summary = find(browser, ".sq-summary").text
    assert "Dead" in summary and "Oldest due pending job" in summary
    assert find(browser, "link[href$='django_sqlqueue/admin.css']")
    screenshot(browser, "admin-job-list.png")

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

    # Requeue one of them from the list: tick it, pick the action, run it.
    target = seeded.dead_recent_other
    find(browser, f"input.action-select[value='{target.pk}']").click()
    from selenium.webdriver.support.select import Select

    Select(find(browser, "select[name=action]")).select_by_value("requeue_selected")
    find(browser, "button[name=index]").click()
    wait_for(browser, lambda b: messages_on_screen(b))
    assert messages_on_screen(browser) == ["Requeued 1 job."]
    # The list is still filtered on dead jobs: the requeued one has left it.
    assert set(listed_rows(browser)) == {seeded.dead_recent.pk}
    assert Job.objects.get(pk=target.pk).status == "pending"

    # Read the other dead job: its payload, every attempt and the traceback.
    find(browser, f"#result_list th.field-id a[href*='/{seeded.dead_recent.pk}/']").click()
    wait_for(browser, lambda b: f"/{seeded.dead_recent.pk}/change/" in b.current_url)
    page = find(browser, "#content").text
    assert "customer_id" in page and "charge-order-88213" in page
    assert len(find_all(browser, "tr.sq-attempt")) == 3
    find(browser, "details.sq-traceback summary").click()
    assert "insufficient_funds" in find(browser, "details.sq-traceback pre").text
    screenshot(browser, "admin-job-detail.png")

    # Requeue it with the page's button: the page says so and shows it pending.
    find(browser, "button.sq-tool-requeue").click()
    wait_for(browser, lambda b: messages_on_screen(b))
    assert messages_on_screen(browser) == ["Requeued 1 job."]
    badge = find(browser, ".field-status_badge .sq-badge")
    assert badge.text == "Pending"
    assert "0 / 3" in find(browser, ".field-attempts_display .readonly").text
    assert not find_all(browser, "button.sq-tool-requeue")  # a pending job: nothing to requeue

    # Cancel two pending jobs and a running one: a confirmation page first, then a message
    # saying what happened to each.
    chosen = [*seeded.pending[:2], seeded.running]
    open_page(browser, f"{live_server.url}{job_list}")
    for job in chosen:
        find(browser, f"input.action-select[value='{job.pk}']").click()
    Select(find(browser, "select[name=action]")).select_by_value("cancel_selected")
    find(browser, "button[name=index]").click()
    wait_for(browser, lambda b: find_all(b, ".sq-confirm-list"))
    assert "Running jobs cannot be cancelled" in find(browser, "#content").text
    assert len(find_all(browser, ".sq-confirm-list li.sq-skip")) == 1
    screenshot(browser, "admin-cancel-confirm.png")
    find(browser, "input[type=submit][value='Yes, cancel']").click()
    wait_for(browser, lambda b: messages_on_screen(b))
    [message] = messages_on_screen(browser)
    assert message.startswith("Cancelled 2 of 3 selected jobs.")
    assert listed_rows(browser)[seeded.pending[0].pk] == "cancelled"
    assert listed_rows(browser)[seeded.running.pk] == "running"

    # The workers panel: the stale worker is marked, the busy one links to its job. The two
    # live workers beat again now, as real ones would have while the test clicked around.
    Worker.objects.filter(hostname="web-1").update(last_seen_at=timezone.now())
    open_page(browser, live_server.url + reverse("admin:django_sqlqueue_worker_changelist"))
    assert len(find_all(browser, ".sq-badge.sq-dead")) == 1  # "stale"
    assert (
        find(browser, f"a[href$='/job/{seeded.running.pk}/change/']").text
        == f"job #{seeded.running.pk}"
    )
    screenshot(browser, "admin-workers.png")
