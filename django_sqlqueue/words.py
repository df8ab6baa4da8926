"""Counts in messages as a person writes them: "1 job", "2 jobs", never "1 jobs"."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`number` and `noun`, the noun in the plural unless the number is one."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"
