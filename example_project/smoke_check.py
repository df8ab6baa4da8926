"""Drive the running demo page as a browser would: load it, press a button, read the list.

Used by `scripts/demo.sh --check`:  python smoke_check.py http://127.0.0.1:8000
With DEMO_USER and DEMO_PASSWORD set, it also logs in to the admin and opens the job list.
Exits 0 when everything answered as expected, else 1 with what went wrong.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request


class SmokeCheckError(Exception):
    pass


def check(base_url: str) -> list[str]:
    cookies = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
    notes = []

    page = opener.open(f"{base_url}/", timeout=10).read().decode()
    if "Tea shop: background jobs" not in page:
        raise SmokeCheckError("the home page lacks its heading")
    for button in ("Send a welcome email", "Build a sales report", "Sync inventory", "batch of 20"):
        if button not in page:
            raise SmokeCheckError(f"the home page lacks the button {button!r}")
    notes.append("home page answers with its four buttons")

    token = next((c.value for c in cookies if c.name == "csrftoken"), None)
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if token is None or match is None:
        raise SmokeCheckError("the page set no CSRF token")
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": match.group(1)}).encode()
    response = opener.open(f"{base_url}/enqueue/batch/", data=form, timeout=10)
    after = response.read().decode()
    if "Enqueued 20 jobs" not in after:
        raise SmokeCheckError("pressing 'Enqueue a batch of 20' did not report 20 jobs")
    notes.append("the batch button enqueued 20 jobs")

    fragment = opener.open(f"{base_url}/jobs/", timeout=10).read().decode()
    rows = fragment.count('<span class="status status-')
    if rows < 20:
        raise SmokeCheckError(f"the job list shows {rows} jobs, expected at least 20")
    notes.append(f"the job list shows {rows} jobs")

    try:
        opener.open(f"{base_url}/enqueue/nonsense/", data=form, timeout=10)
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise SmokeCheckError(f"an unknown job kind gave HTTP {error.code}, not 404") from None
    else:
        raise SmokeCheckError("an unknown job kind was accepted")
    notes.append("an unknown job kind is a 404")

    user, password = os.environ.get("DEMO_USER"), os.environ.get("DEMO_PASSWORD")
    if user and password:
        notes.append(check_admin(opener, cookies, base_url, user, password))
    return notes


def check_admin(
    opener: urllib.request.OpenerDirector,
    cookies: http.cookiejar.CookieJar,
    base_url: str,
    user: str,
    password: str,
) -> str:
    """Log in as the printed staff user and open the job list, as the demo tells people to."""
    job_list = "/admin/django_sqlqueue/job/"
    login_url = f"{base_url}/admin/login/?next={job_list}"
    opener.open(login_url, timeout=10).read()
    token = next((c.value for c in cookies if c.name == "csrftoken"), "")
    form = {"csrfmiddlewaretoken": token, "username": user, "password": password}
    response = opener.open(
        urllib.request.Request(
            login_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={"Referer": login_url},
        ),
        timeout=10,
    )
    page = response.read().decode()
    if not response.geturl().endswith(job_list):
        raise SmokeCheckError(f"logging in as {user!r} did not lead to the job list")
    if "shop.send_welcome_email" not in page:
        raise SmokeCheckError("the admin's job list does not show the shop's jobs")
    return f"logged in to the admin as {user!r} and saw the job list"


def main() -> int:
    base_url = sys.argv[1].rstrip("/") if len(sys.argv) > 1 else "http://127.0.0.1:8000"
    try:
        for note in check(base_url):
            print(f"ok: {note}")
    except (SmokeCheckError, OSError) as error:
        print(f"smoke check failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
