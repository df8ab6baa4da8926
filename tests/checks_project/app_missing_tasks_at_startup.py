"""The same project, with an app that defines its tasks when Django starts (as Wagtail does)."""

from tests.checks_project.app_missing import *  # noqa: F403
from tests.checks_project.app_missing import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.checks_project.shop"]
