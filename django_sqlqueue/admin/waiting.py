"""Why a waiting job is not running: what the admin's job page shows under "Flow control"."""

from __future__ import annotations

from django.utils import timezone
from django.utils.translation import gettext as _

from ..conf import get_settings
from ..flow.spec import GATED
from ..models import FlowKey, Job, QueueState
from ..options import RateLimit
from ..states import CLAIMABLE, Status


def waiting_reasons(job: Job, alias: str | None = None) -> list[str]:
    """Sentences naming each flow control that holds `job` back now (none: nothing does)."""
    if job.status not in CLAIMABLE:
        return []
    alias = alias or get_settings().database
    reasons = []
    state = QueueState.objects.using(alias).filter(queue=job.queue).first()
    if state is not None and state.paused_at is not None:
        reasons.append(
            _("Its queue %(queue)s is paused (since %(when)s%(by)s%(reason)s).")
            % {
                "queue": job.queue,
                "when": f"{state.paused_at:%Y-%m-%d %H:%M:%S}",
                # Translators: after the time the queue was paused: who paused it.
                "by": _(", by %(who)s") % {"who": state.paused_by} if state.paused_by else "",
                "reason": f": {state.reason}" if state.reason else "",
            }
        )
    spec = GATED.specs.get(job.name)
    if spec is not None and spec.concurrency is not None and job.concurrency_key:
        running = (
            Job.objects.using(alias)
            .filter(status=Status.RUNNING, concurrency_key=job.concurrency_key)
            .count()
        )
        if running >= spec.concurrency:
            reasons.append(
                _(
                    "Concurrency limit reached: %(running)d of %(limit)d jobs with key "
                    "%(key)s are running."
                )
                % {"running": running, "limit": spec.concurrency, "key": job.concurrency_key}
            )
    limits: list[tuple[str, RateLimit]] = []
    if spec is not None and spec.rate is not None:
        limits.append((f"rate:job:{job.name}", spec.rate))
    queue_rate = get_settings().queue_rate_limits.get(job.queue)
    if queue_rate is not None:
        limits.append((f"rate:queue:{job.queue}", queue_rate))
    now = timezone.now().timestamp()
    for key, rate in limits:
        row = FlowKey.objects.using(alias).filter(key=key).first()
        recent = [float(t) for t in (row.starts if row else []) if float(t) > now - rate.period]
        if len(recent) >= rate.limit:
            reasons.append(
                _("Rate limit %(rate)s reached (%(key)s): %(count)d starts in the last period.")
                % {"rate": rate.text, "key": key.removeprefix("rate:"), "count": len(recent)}
            )
    return reasons
