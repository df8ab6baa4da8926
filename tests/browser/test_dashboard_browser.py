"""The queue dashboard in a real browser, in the light and the dark theme: four charts drawn,
readable against their background, tooltips on the bars, the day view one click away.

Screenshots (admin-dashboard.png, admin-dashboard-dark.png) go where the other browser tests'
go: docs/img with `scripts/test.sh --screenshots`, a temporary folder otherwise.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format

from django_sqlqueue.metrics import rollups
from django_sqlqueue.models import JobRollup, QueueSample

from . import SQLITE_RUNS_ONLY
from .layout import horizontal_overflow
from .test_admin_browser import find, find_all, log_in, open_page, screenshot, staff_user, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, SQLITE_RUNS_ONLY]
__all__ = ["staff_user"]  # the fixture, imported for this module's tests

#: WCAG 2's least contrast for graphics (the series) and for text (the axes).
GRAPHIC_CONTRAST = 3.0
TEXT_CONTRAST = 4.5


def seed_an_afternoon() -> None:
    """A day of a plausible queue: a daily wave of mail, steady reports, a bad half hour."""
    now = timezone.now()
    rows, samples = [], []
    for back in range(24 * 60):
        minute = rollups.minute_of((now - timedelta(minutes=back)).timestamp())
        wave = 1 + math.sin(back / 90)
        for queue, name, base in (("mail", "shop.send_email", 40), ("reports", "shop.report", 6)):
            done = int(base * wave) + 1
            bad = 5 <= back < 35 and queue == "mail"
            rows.append(
                JobRollup(
                    minute=minute,
                    queue=queue,
                    name=name,
                    outcome="completed",
                    count=done,
                    duration_sum=done * (0.05 if queue == "mail" else 2.0),
                    wait_b1=done // 2,
                    wait_b3=done - done // 2 - done // 10,
                    wait_b5=done // 10,
                )
            )
            if bad or back % 17 == 0:
                failed = 8 if bad else 1
                rows.append(
                    JobRollup(
                        minute=minute,
                        queue=queue,
                        name=name,
                        outcome="failed",
                        count=failed,
                        wait_b2=failed,
                    )
                )
            if back % 181 == 0:
                rows.append(
                    JobRollup(
                        minute=minute, queue=queue, name=name, outcome="dead", count=1, wait_b2=1
                    )
                )
            samples.append(
                QueueSample(
                    minute=minute,
                    queue=queue,
                    pending=int(30 * wave) if queue == "mail" else 3,
                    failed=8 if bad else 0,
                    oldest_wait=2.0,
                )
            )
    JobRollup.objects.bulk_create(rows, batch_size=2000)
    QueueSample.objects.bulk_create(samples, batch_size=2000)


def chart_colours(browser: Any) -> list[str]:
    """Series and axis text whose contrast with the chart's background is too low."""
    return browser.execute_script(
        """
        const parse = c => { const m = c.match(/[\\d.]+/g).map(Number); return m; };
        const lum = m => { const f = v => { v /= 255;
            return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
          return 0.2126 * f(m[0]) + 0.7152 * f(m[1]) + 0.0722 * f(m[2]); };
        const ratio = (a, b) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        const problems = [];
        for (const panel of document.querySelectorAll('.sq-chart-panel')) {
          const bg = lum(parse(getComputedStyle(panel).backgroundColor));
          for (const el of panel.querySelectorAll('rect, polyline, circle')) {
            const style = getComputedStyle(el);
            const colour = el.tagName === 'polyline' ? style.stroke : style.fill;
            const r = ratio(lum(parse(colour)), bg);
            if (r < arguments[0]) problems.push(el.getAttribute('class') + ' ' + r.toFixed(2));
          }
          for (const el of panel.querySelectorAll('text.sq-axis')) {
            const r = ratio(lum(parse(getComputedStyle(el).fill)), bg);
            if (r < arguments[1]) problems.push('axis ' + r.toFixed(2));
          }
        }
        return [...new Set(problems)];
        """,
        GRAPHIC_CONTRAST,
        TEXT_CONTRAST,
    )


def test_dashboard_in_both_themes(browser, live_server, staff_user, screenshots):
    seed_an_afternoon()
    url = reverse("admin:django_sqlqueue_dashboard")
    job_list = reverse("admin:django_sqlqueue_job_changelist")
    log_in(browser, live_server, staff_user, job_list)
    # Reached from the job list's tools.
    find(browser, f".object-tools a[href='{url}']").click()
    wait_for(browser, lambda b: url in b.current_url)
    for theme, name in (("light", "admin-dashboard.png"), ("dark", "admin-dashboard-dark.png")):
        browser.execute_script(f"localStorage.setItem('theme', '{theme}')")
        browser.set_window_size(1366, 900)
        open_page(browser, live_server.url + url)
        assert browser.execute_script("return document.documentElement.dataset.theme") == theme
        charts = find_all(browser, "svg.sq-chart")
        assert len(charts) == 4
        for chart in charts:
            assert chart.size["width"] > 300 and chart.size["height"] > 80
        assert len(find_all(browser, "#chart-finished rect")) >= 60
        assert len(find_all(browser, "#chart-backlog polyline")) == 2
        assert len(find_all(browser, "#chart-wait polyline")) == 2
        assert chart_colours(browser) == [], theme
        assert "page" not in horizontal_overflow(browser), theme
        # Nothing loaded from another origin.
        origins = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => new URL(e.name).origin)"
        )
        assert set(origins) <= {live_server.url}, origins
        screenshot(browser, screenshots, name, width=1366)

    # The day view: 144 ten-minute bars at most, the bad half hour in the failure rate.
    find(browser, "a.sq-range-item[href='?range=day']").click()
    wait_for(browser, lambda b: "range=day" in b.current_url)
    bars = find_all(browser, "#chart-finished rect")
    assert 144 <= len(bars) <= 144 * 5
    title = find(browser, "#chart-finished rect title").get_attribute("textContent")
    assert ":" in title
    assert find(browser, ".sq-range-item.sq-active").text == "Last 24 hours"
    # It says what a bar is, and dates its times: under each time on the axis, and on hover.
    assert "10-minute buckets" in find(browser, ".sq-bucket-note").text
    days = {date_format(timezone.localtime() - timedelta(days=back), "M j") for back in (0, 1)}
    for chart in ("finished", "backlog", "wait", "failures"):
        ticks = x_ticks(browser, chart)
        assert len(ticks) >= 5, (chart, ticks)
        assert all(len(lines) == 2 and lines[1] in days for lines in ticks), (chart, ticks)
    assert any(day in title for day in days), title
    for chart in ("finished", "backlog"):
        assert whole_numbers(y_ticks(browser, chart)), chart


def x_ticks(browser: Any, chart: str) -> list[list[str]]:
    """The x-axis labels of a chart, each as its lines."""
    return browser.execute_script(
        "return [...document.querySelectorAll(`#chart-${arguments[0]} text.sq-x`)]"
        ".map(t => [...t.querySelectorAll('tspan')].map(s => s.textContent));",
        chart,
    )


def y_ticks(browser: Any, chart: str) -> list[str]:
    return browser.execute_script(
        "return [...document.querySelectorAll(`#chart-${arguments[0]} text.sq-axis:not(.sq-x)`)]"
        ".map(t => t.textContent);",
        chart,
    )


def whole_numbers(ticks: list[str]) -> bool:
    """Every tick a count of whole jobs (1.5k is 1,500 jobs)."""
    scale = {"k": 1_000, "M": 1_000_000}
    values = [float(t[:-1]) * scale[t[-1]] if t[-1] in scale else float(t) for t in ticks]
    return len(values) == 3 and all(value == int(value) for value in values)


def test_count_axes_count_whole_jobs(browser, live_server, staff_user):
    """With a job or three, the count charts' y-axes read 0, 1, 2 jobs, not 0, 0.5, 1."""
    minute = rollups.minute_of(timezone.now().timestamp())
    JobRollup.objects.create(
        minute=minute, queue="mail", name="shop.send_email", outcome="completed", count=1
    )
    QueueSample.objects.create(minute=minute, queue="mail", pending=3, failed=0, oldest_wait=1.0)
    browser.set_window_size(1366, 900)
    log_in(browser, live_server, staff_user, reverse("admin:django_sqlqueue_dashboard"), "light")
    assert y_ticks(browser, "finished") == ["0", "1", "2"]
    assert y_ticks(browser, "backlog") == ["0", "2", "4"]
    assert "one minute" in find(browser, ".sq-bucket-note").text


def breadcrumbs_style(browser: Any) -> dict[str, Any]:
    """The breadcrumbs bar as drawn, beside the colours Django's variables give it."""
    return browser.execute_script(
        """
        const bar = document.querySelector('nav .breadcrumbs');
        const resolve = (property, variable) => {
          const probe = document.createElement('span');
          probe.style[property] = `var(${variable})`;
          bar.appendChild(probe);
          const value = getComputedStyle(probe)[property];
          probe.remove();
          return value;
        };
        const style = getComputedStyle(bar);
        const first = bar.querySelector('li, a');
        const link = bar.querySelector('a');
        return {
          tag: bar.tagName.toLowerCase(),
          background: style.backgroundColor,
          expected_background: resolve('backgroundColor', '--breadcrumbs-bg'),
          link: getComputedStyle(link).color,
          expected_link: resolve('color', '--breadcrumbs-link-fg'),
          padding_left: parseFloat(style.paddingLeft),
          markers: [...bar.querySelectorAll('li')].map(li => getComputedStyle(li).display),
          separator: bar.tagName === 'OL' ? getComputedStyle(first, '::after').content : '',
          text: bar.textContent.replace(/\\s+/g, ' ').trim(),
        };
        """
    )


def test_breadcrumbs_are_styled(browser, live_server, staff_user):
    """Our pages' breadcrumbs are drawn as Django's own: its bar colour and link colour, on
    one line with a separator between the steps, whichever markup the Django line uses."""
    seed_an_afternoon()
    queues = Permission.objects.get(
        content_type__app_label="django_sqlqueue", codename="view_queuestate"
    )
    staff_user.user_permissions.add(queues)
    browser.set_window_size(1366, 900)
    job_list = reverse("admin:django_sqlqueue_job_changelist")
    log_in(browser, live_server, staff_user, job_list, "light")
    pages = {
        "dashboard": reverse("admin:django_sqlqueue_dashboard"),
        "queues": reverse("admin:django_sqlqueue_queuestate_changelist"),
        "purge": reverse("admin:django_sqlqueue_job_purge_old"),
        "jobs": job_list,
    }
    for theme in ("light", "dark"):
        browser.execute_script(f"localStorage.setItem('theme', '{theme}')")
        for name, url in pages.items():
            open_page(browser, live_server.url + url)
            style = breadcrumbs_style(browser)
            where = (theme, name, style)
            assert style["background"] == style["expected_background"], where
            assert style["background"] != "rgba(0, 0, 0, 0)", where
            assert style["link"] == style["expected_link"], where
            assert style["padding_left"] >= 15, where
            assert style["text"].startswith("Home"), where
            if style["tag"] == "ol":
                assert set(style["markers"]) == {"inline-block"}, where
                assert "\u203a" in style["separator"], where
            assert find(browser, "nav .breadcrumbs").size["height"] < 60, where
