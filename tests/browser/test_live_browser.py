"""The dashboard and the job list refresh themselves, and stop when asked to, when a job is
selected or a field has the focus.

Every wait is on the page: a row or a link appearing, or the live control's tick counter
(data-sq-ticks, one more each period, refreshed or not) moving on, never on a clock. The
browser's period is set to 1 second (the django_sqlqueue.live.seconds key) to keep the test
short; the page's own is 5.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.metrics import rollups
from django_sqlqueue.models import Job, JobRollup

from . import SQLITE_RUNS_ONLY
from .test_admin_browser import find, find_all, log_in, open_page, staff_user, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, SQLITE_RUNS_ONLY]
__all__ = ["staff_user"]  # the fixture, imported for this module's tests


def ticks(browser: Any) -> int:
    return int(find(browser, "[data-sq-live]").get_attribute("data-sq-ticks") or 0)


def wait_periods(browser: Any, periods: int = 2) -> None:
    """Until the page has let `periods` refresh periods pass (paused or not)."""
    start = ticks(browser)
    wait_for(browser, lambda b: ticks(b) >= start + periods)


def act_on_the_live_page(browser: Any, act: Any) -> None:
    """Do `act` (a click, a focus) on a page that reloads itself, so that it takes: found and
    done on one page, and that page ticked on after it, so it saw the act and holds still.

    The list reloads at a tick unless held; a reload already under way when `act` ran takes
    the act with the page it was done on (that page never ticks again), or swaps the element
    between its find and its click. Either way, act again on the fresh page."""
    from selenium.common.exceptions import (
        JavascriptException,
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.support.ui import WebDriverWait

    # What a page being replaced may raise at any step: look again.
    replaced = (JavascriptException, NoSuchElementException, StaleElementReferenceException)

    def until(condition: Any) -> Any:
        return WebDriverWait(browser, 15, ignored_exceptions=replaced).until(condition)

    for _ in range(5):
        until(lambda b: b.execute_script(READY))
        try:
            act()
            start = browser.execute_script(f"window.sqActed = true; return {TICKS};")
        except replaced:
            continue
        until(lambda b, start=start: b.execute_script(TICKED_OR_GONE, start))
        until(lambda b: b.execute_script(READY))
        if browser.execute_script(ACTED):  # the page it acted on ticked, and held
            return
    pytest.fail("the page reloaded under every attempt to act on it")


#: The live control's tick count on the page as it is now (-1 while it loads).
TICKS = (
    "(() => { const c = document.querySelector('[data-sq-live]');"
    " return c ? Number(c.dataset.sqTicks || 0) : -1; })()"
)
READY = f"return document.readyState === 'complete' && {TICKS} >= 0"
#: The page that was marked ticked on past arguments[0], or it is gone (reloaded).
TICKED_OR_GONE = f"return window.sqActed !== true || {TICKS} > arguments[0]"
ACTED = "return window.sqActed === true"


def finished_in(queue: str) -> None:
    """An attempt of `queue` finished this minute, as a worker's rollup records it."""
    minute = rollups.minute_of(timezone.now().timestamp())
    JobRollup.objects.create(minute=minute, queue=queue, name="shop.report", count=1)


def queue_link(queue: str) -> str:
    return f"#per-queue + table a[href$='?queue={queue}']"


def toggle(browser: Any) -> Any:
    return find(browser, "[data-sq-live] button")


def test_the_dashboard_refreshes_itself_until_paused(browser, live_server, staff_user):
    browser.set_window_size(1366, 900)
    dashboard = reverse("admin:django_sqlqueue_dashboard")
    log_in(browser, live_server, staff_user, dashboard, "light")
    browser.execute_script("localStorage.setItem('django_sqlqueue.live.seconds', '1')")
    open_page(browser, live_server.url + dashboard)
    assert toggle(browser).text.lower() == "pause live updates"
    browser.execute_script("window.sqNotReloaded = true")

    # What workers record after the page loaded appears on it, without a reload.
    finished_in("arrived-later")
    wait_for(browser, lambda b: find_all(b, queue_link("arrived-later")))
    assert browser.execute_script("return window.sqNotReloaded") is True

    # Paused: nothing changes, however many periods pass; the pause outlives a reload.
    toggle(browser).click()
    assert toggle(browser).get_attribute("aria-pressed") == "true"
    assert toggle(browser).text.lower() == "resume live updates"
    finished_in("while-paused")
    wait_periods(browser)
    assert not find_all(browser, queue_link("while-paused"))
    open_page(browser, live_server.url + dashboard)
    assert toggle(browser).text.lower() == "resume live updates"
    assert find_all(browser, queue_link("while-paused"))  # the server's page has it

    # Resumed: live again.
    toggle(browser).click()
    finished_in("after-resume")
    wait_for(browser, lambda b: find_all(b, queue_link("after-resume")))


def test_the_job_list_refreshes_itself_but_not_under_a_selection(browser, live_server, staff_user):
    browser.set_window_size(1366, 900)
    job_list = reverse("admin:django_sqlqueue_job_changelist")
    first = Job.objects.create(name="shop.send_welcome_email", queue="mail")
    log_in(browser, live_server, staff_user, job_list, "light")
    browser.execute_script("localStorage.setItem('django_sqlqueue.live.seconds', '1')")
    open_page(browser, live_server.url + job_list)
    assert find(browser, "link[href$='django_sqlqueue/admin.css']")

    def row(job: Job) -> str:
        return f"#result_list input.action-select[value='{job.pk}']"

    # A job enqueued after the page loaded appears in the list.
    second = Job.objects.create(name="shop.sync_inventory", queue="default")
    wait_for(browser, lambda b: find_all(b, row(second)))

    # A job selected: the list holds still, so the selection is not lost.
    act_on_the_live_page(browser, lambda: find(browser, row(first)).click())
    third = Job.objects.create(name="shop.build_sales_report", queue="reports")
    wait_periods(browser)
    assert not find_all(browser, row(third))
    assert find(browser, row(first)).is_selected()

    # Unselected, it is live again; and a field with the focus holds it still too.
    find(browser, row(first)).click()
    wait_for(browser, lambda b: find_all(b, row(third)))
    act_on_the_live_page(browser, lambda: find(browser, "#searchbar").click())
    fourth = Job.objects.create(name="shop.send_welcome_email", queue="mail")
    wait_periods(browser)
    assert not find_all(browser, row(fourth))
