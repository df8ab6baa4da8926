"""A job's public reference: its id and a random nonce, so a kept reference never names
another job.

The id alone is not enough to keep. After a PostgreSQL failover that lost the newest commits
(asynchronous replication), the id sequence restarts from the standby's older position and
hands the lost jobs' ids to new jobs. The nonce, drawn for each job as it is stored, tells the
two apart: a lookup by reference matches the id and the nonce, and a lost job's reference
finds nothing. Jobs stored before the nonce existed have none (NULL); their reference is their
id alone, as it always was, and matches only a row without a nonce.
"""

from __future__ import annotations

import random
import re
from typing import NamedTuple

#: 63 random bits: a signed 64-bit column on every database holds them.
NONCE_BITS = 63
_LARGEST_ID = 2**63 - 1
#: "<id>-<nonce in hex>", or "<id>" for a job stored before nonces. ASCII decimal without a
#: sign or leading zeros, lowercase hex: any other spelling names no job.
_REFERENCE = re.compile(r"([1-9][0-9]{0,18})(?:-([1-9a-f][0-9a-f]{0,15}|0))?", re.ASCII)


class Reference(NamedTuple):
    """A parsed reference: the job's id, and its nonce (None: a job stored before nonces)."""

    id: int
    nonce: int | None


def draw_nonce() -> int:
    """A new job's nonce. From `random`, not `secrets`: it need not be secret, only differ
    from a lost job's (Python reseeds the generator in every forked child)."""
    return random.getrandbits(NONCE_BITS)


def format_reference(job_id: int, nonce: int | None) -> str:
    """The reference of the job with this id and nonce."""
    return str(job_id) if nonce is None else f"{job_id}-{nonce:x}"


def parse_reference(text: object) -> Reference | None:
    """The id and nonce `text` names, or None when it is not a reference."""
    match = _REFERENCE.fullmatch(str(text))
    if match is None:
        return None
    job_id = int(match[1])
    nonce = None if match[2] is None else int(match[2], 16)
    if job_id > _LARGEST_ID or (nonce is not None and nonce >> NONCE_BITS):
        return None
    return Reference(job_id, nonce)


def id_in(reference: object) -> int:
    """The job id `reference` carries; ValueError if it is not a reference. The id alone may
    name another job after a failover: look jobs up with the whole reference."""
    parsed = parse_reference(reference)
    if parsed is None:
        raise ValueError(f"{reference!r} is not a job reference")
    return parsed.id
