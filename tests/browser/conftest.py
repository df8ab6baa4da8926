"""Headless Debian Chromium driven by Selenium, static files for the live server, the
example project's jobs, and where screenshots go.

Without Chromium, chromedriver or selenium the browser tests skip on a developer's machine
but fail when CI=true: CI must not pass by running nothing (scripts/install_browser.sh
installs the browser).

Screenshots go to a temporary folder unless SQLQUEUE_SCREENSHOTS names one
(`scripts/test.sh --screenshots` points it at docs/img).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.test.utils import override_settings

from .seed import example_jobs_only

CHROMIUM = Path(os.environ.get("SQLQUEUE_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("SQLQUEUE_CHROMEDRIVER", "/usr/bin/chromedriver"))
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1600,1000",
)


def missing_browser() -> str | None:
    """Why the browser test cannot run here, or None when it can."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found (run scripts/install_browser.sh)"
    if not CHROMEDRIVER.exists():
        return f"{CHROMEDRIVER} not found (run scripts/install_browser.sh)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[browser]')"
    return None


@pytest.fixture(scope="session")
def browser_available() -> None:
    reason = missing_browser()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"The browser test must run in CI: {reason}.", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def served_static_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Serve every app's static/ from the live server, so pages render with their CSS and JS.

    With django.contrib.staticfiles installed the live server finds them itself; the test
    settings do not install it, so the files are gathered into a STATIC_ROOT that
    pytest-django's live server serves. Must run before `live_server` starts (session scope,
    autouse).
    """
    if "django.contrib.staticfiles" in settings.INSTALLED_APPS:
        yield
        return
    root = tmp_path_factory.mktemp("static")
    for config in apps.get_app_configs():
        static = Path(config.path) / "static"
        if static.is_dir():
            shutil.copytree(static, root, dirs_exist_ok=True)
    with override_settings(STATIC_URL="/static/", STATIC_ROOT=str(root)):
        yield


@pytest.fixture
def browser(browser_available: None) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="sqlqueue-chromium-")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def example_jobs() -> Iterator[list[str]]:
    """Only the example project's jobs are registered (they fill the name filter)."""
    with example_jobs_only() as names:
        yield names


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SQLQUEUE_SCREENSHOTS when set (docs/img, on request), a temporary folder otherwise."""
    chosen = os.environ.get("SQLQUEUE_SCREENSHOTS")
    if not chosen:
        return tmp_path_factory.mktemp("screenshots")
    folder = Path(chosen)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
