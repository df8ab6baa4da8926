"""The French translation: a complete catalog, compiled, and the admin rendered in French.

django_sqlqueue/locale/fr/LC_MESSAGES/django.po is read by a small parser (no dependency):
every entry is translated (each plural form), none is fuzzy, and each translation keeps the
placeholders and HTML tags of its English. The compiled django.mo says the same, entry for
entry, and makemessages run on a copy of the package finds no string the catalog lacks.

Then every page of the admin is rendered in English and in French, with data in each state
that changes its text: the French page shows known French text, and none of the catalog's
English strings that the English page showed. Data values are made of `zq` tokens, so that
they are told apart from text, as in test_translation.py.
"""

# French as the catalog writes it, with typographic apostrophes (U+2019).
# ruff: noqa: RUF001

from __future__ import annotations

import ast
import gettext as gettext_module
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone, translation

import django_sqlqueue
from django_sqlqueue.admin import display
from django_sqlqueue.admin.actions import OPERATIONS, ActionReport
from django_sqlqueue.admin.changelist import count_text
from django_sqlqueue.admin.counting import ESTIMATE, EXACT
from django_sqlqueue.conf import get_settings
from django_sqlqueue.metrics import rollups
from django_sqlqueue.models import Job, JobBatch, JobRollup, QueueSample, QueueState, Worker
from django_sqlqueue.models.schedule import Schedule
from django_sqlqueue.registry import registry
from django_sqlqueue.scheduling.describe import describe
from django_sqlqueue.states import Status

from .helpers import attempt_history, change_url, changelist_url, job_in, operation_url
from .test_translation import VisibleText

PACKAGE = Path(django_sqlqueue.__file__).resolve().parent
ROOT = PACKAGE.parent
CATALOG = PACKAGE / "locale" / "fr" / "LC_MESSAGES"
NBSP = "\u00a0"

# The catalog ---------------------------------------------------------------------------------


@dataclass
class Entry:
    """One message of a .po file: its English, its context, its French (one per plural form)."""

    msgid: str
    msgctxt: str | None = None
    msgid_plural: str | None = None
    msgstr: list[str] = field(default_factory=list)
    flags: frozenset[str] = frozenset()

    @property
    def key(self) -> tuple[str | None, str, str | None]:
        return (self.msgctxt, self.msgid, self.msgid_plural)

    def pairs(self) -> list[tuple[str, str]]:
        """(English, French) of each form: the singular, then the plural ones."""
        if self.msgid_plural is None:
            return [(self.msgid, form) for form in self.msgstr]
        return [(self.msgid, self.msgstr[0]), *((self.msgid_plural, s) for s in self.msgstr[1:])]


KEYWORD = re.compile(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(".*")$')


def parse_po(text: str) -> list[Entry]:
    """The entries of a .po file, the header (msgid "") first; obsolete (#~) ones left out."""
    entries = []
    for block in re.split(r"\n[ \t]*\n", text.strip()):
        fields: dict[str, str] = {}
        flags: set[str] = set()
        current = ""
        for line in block.splitlines():
            if line.startswith("#,"):
                flags.update(flag.strip() for flag in line[2:].split(","))
            elif line.startswith("#"):
                continue  # comments, references, obsolete entries
            elif line.startswith('"'):
                fields[current] += ast.literal_eval(line)
            else:
                match = KEYWORD.match(line)
                assert match, f"not a .po line: {line!r}"
                current = match.group(1)
                fields[current] = ast.literal_eval(match.group(2))
        if not fields:
            continue
        forms = sorted((k for k in fields if k.startswith("msgstr")), key=lambda k: (len(k), k))
        entries.append(
            Entry(
                msgid=fields["msgid"],
                msgctxt=fields.get("msgctxt"),
                msgid_plural=fields.get("msgid_plural"),
                msgstr=[fields[k] for k in forms],
                flags=frozenset(flags),
            )
        )
    return entries


def read_catalog(path: Path = CATALOG / "django.po") -> tuple[Entry, list[Entry]]:
    header, *entries = parse_po(path.read_text(encoding="utf-8"))
    assert header.msgid == "", "the header comes first"
    return header, entries


#: %(name)s, %s, %d, %02d, %.2f, {name}: the values put into a message.
PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[a-zA-Z%]|\{[^}]*\}")
#: Placeholders and HTML tags: what a translation must keep.
TOKEN = re.compile(rf"{PLACEHOLDER.pattern}|<[^>]*>")


def tokens(message: str) -> list[str]:
    return sorted(TOKEN.findall(message))


def test_the_parser_reads_contexts_plurals_flags_and_continued_lines():
    header, *entries = parse_po(
        'msgid ""\nmsgstr ""\n"Language: fr\\n"\n\n'
        '#: a.py:1\n#, fuzzy, python-format\nmsgctxt "job action"\nmsgid "Run %(n)d"\n'
        'msgid_plural "Run %(n)d"\nmsgstr[0] "Lancer "\n"%(n)d \\"x\\""\nmsgstr[1] ""\n\n'
        '#~ msgid "gone"\n#~ msgstr "parti"\n'
    )
    assert header.msgstr == ["Language: fr\n"]
    [entry] = entries
    assert entry.key == ("job action", "Run %(n)d", "Run %(n)d")
    assert entry.msgstr == ['Lancer %(n)d "x"', ""]
    assert entry.flags == {"fuzzy", "python-format"}
    assert tokens('<a href="%(url)s">#%(id)d</a> {name} %s') == sorted(
        ['<a href="%(url)s">', "%(id)d", "</a>", "{name}", "%s"]
    )


def test_the_catalog_is_french_with_french_plural_forms():
    header, entries = read_catalog()
    [meta] = header.msgstr
    assert "Language: fr\n" in meta
    assert "Plural-Forms: nplurals=2; plural=(n > 1);\n" in meta
    assert "charset=UTF-8" in meta
    assert "fuzzy" not in header.flags
    assert len(entries) > 300


def test_every_entry_is_translated_and_keeps_its_placeholders():
    _, entries = read_catalog()
    problems = []
    for entry in entries:
        where = (entry.msgctxt, entry.msgid)
        if "fuzzy" in entry.flags:
            problems.append(("fuzzy", where))
        forms = 1 if entry.msgid_plural is None else 2  # nplurals=2
        if len(entry.msgstr) != forms:
            problems.append((f"{len(entry.msgstr)} forms, not {forms}", where))
        for english, french in entry.pairs():
            if not french.strip():
                problems.append(("untranslated", where))
            elif tokens(english) != tokens(french):
                problems.append((f"placeholders {tokens(french)} != {tokens(english)}", where))
            elif "  " in french or (french != french.strip() and english == english.strip()):
                problems.append(("stray spaces", where))
    assert problems == [], "\n".join(map(str, problems))


def test_the_compiled_catalog_says_what_the_po_says():
    _, entries = read_catalog()
    with (CATALOG / "django.mo").open("rb") as compiled:
        mo = gettext_module.GNUTranslations(compiled)
    assert [mo.plural(n) for n in (0, 1, 2, 10)] == [0, 0, 1, 1]
    expected: set[Any] = {""}  # the header
    wrong = []
    for entry in entries:
        ctx, msgid, plural = entry.key
        key = msgid if ctx is None else f"{ctx}\x04{msgid}"
        if plural is None:
            got = mo.gettext(msgid) if ctx is None else mo.pgettext(ctx, msgid)
            if got != entry.msgstr[0]:
                wrong.append((entry.key, got))
            expected.add(key)
            continue
        for n, form in ((1, 0), (2, 1)):
            if ctx is None:
                got = mo.ngettext(msgid, plural, n)
            else:
                got = mo.npgettext(ctx, msgid, plural, n)
            if got != entry.msgstr[form]:
                wrong.append((entry.key, n, got))
            expected.add((key, form))
    assert wrong == [], "django.mo is older than django.po: run compilemessages"
    assert set(mo._catalog) == expected, "django.mo holds messages django.po does not"


@pytest.mark.skipif(shutil.which("xgettext") is None, reason="makemessages needs GNU gettext")
@pytest.mark.timeout(120)
def test_makemessages_finds_no_string_the_catalog_lacks(tmp_path: Path):
    """Run on a copy of the package, as a release would: a string marked for translation
    since the catalog was made shows up as a new entry, a string gone as a missing one."""
    copy = tmp_path / "django_sqlqueue"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "django", "makemessages", "-l", "fr", "--no-obsolete"],
        cwd=copy,  # makemessages reads the files under its working directory
        env={**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    _, made = read_catalog(copy / "locale" / "fr" / "LC_MESSAGES" / "django.po")
    _, ours = read_catalog()
    new = {e.key for e in made} - {e.key for e in ours}
    gone = {e.key for e in ours} - {e.key for e in made}
    assert (new, gone) == (set(), set()), "run makemessages -l fr, translate, compilemessages"


# Messages built in code -----------------------------------------------------------------------


@pytest.fixture
def french() -> Iterator[None]:
    with translation.override("fr"):
        yield


def test_messages_counts_durations_and_schedules_in_french(french):
    report = ActionReport(OPERATIONS["requeue"], changed=1, seen=Counter(dead=1))
    assert report.message() == "1 tâche remise en file."
    mixed = ActionReport(OPERATIONS["cancel"], changed=2, seen=Counter(pending=2, completed=1))
    assert mixed.message() == (
        f"Tâches annulées{NBSP}: 2 sur 3 sélectionnées. 1 tâche ignorée{NBSP}: son statut ne "
        f"le permet pas (Réussie: 1). «{NBSP}Annuler{NBSP}» n’accepte que les tâches dont "
        "le statut est En attente, En file, En échec ou En cours."
    )
    assert count_text(EXACT, 1) == "1 tâche"
    assert count_text(EXACT, 0) == "0 tâche"  # French: the singular for 0 and 1
    assert count_text(ESTIMATE, 1_000_000) == f"environ 1{NBSP}000{NBSP}000 tâches"
    assert display.human_seconds(0.25) == f"0,25{NBSP}s"
    assert display.human_seconds(0.0042) == f"4,2{NBSP}ms"
    assert display.human_seconds(0.00085) == f"850{NBSP}µs"
    assert display.human_seconds(200) == f"3{NBSP}min 20{NBSP}s"
    assert display.human_seconds(4000) == f"1{NBSP}h 06{NBSP}min"
    assert display.relative(timezone.now() - timedelta(seconds=42)) == f"il y a 42{NBSP}s"
    assert display.short_status("dead") == "Morte"
    assert display.status_label("failed") == "En échec (nouvel essai prévu)"
    # A msgid used both alone and with a plural (xgettext keeps one plural entry): both read.
    assert describe("* * * * *") == "toutes les minutes"
    assert describe("*/5 * * * *") == "toutes les 5 minutes"
    assert describe("0 3 * * *") == "tous les jours à 03:00"
    assert describe("30 9 * * 1-5") == "en semaine à 09:30"
    assert describe("0 8 * * 1,3") == "chaque lundi et mercredi à 08:00"
    assert describe("0 0 1 1 *") == "chaque année le 1 janvier à 00:00"


# The admin in French ---------------------------------------------------------------------------

NAME, QUEUE, OTHER_QUEUE, LABEL = "zq.zqalpha", "zqq", "zqr", "zqnightly"
WORKER, IDLE_WORKER, HOST, USER = "zqhost:1:zqw0", "zqhost:2:zqw1", "zqhost", "zqstaff"
ERROR = "ZqError: zqboom"


@dataclass
class Made:
    jobs: dict[str, Job]
    batch: JobBatch
    schedule: Schedule


@pytest.fixture
def staff(db: Any) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser(USER, email=None, password=None))
    return client


@pytest.fixture
def made(db: Any) -> Made:
    """A job in every status (the dead one with a history of failed attempts over two runs),
    workers, a paused queue, a batch with members and a child batch, schedules, a dashboard's
    hour of rollups."""
    now = timezone.now()
    history = attempt_history(
        ((1, "error"), (2, "lost"), (1, "timeout")), worker=WORKER, error=ERROR
    )
    common = {"name": NAME, "queue": QUEUE, "last_error": ERROR, "lease_owner": WORKER}
    jobs = {status.value: job_in(status.value, **common) for status in Status}
    jobs["dead"].history = history
    jobs["dead"].idempotency_key = "zqkey"
    jobs["dead"].priority = 3
    jobs["dead"].result = 7
    jobs["dead"].save()
    jobs["failed"].run_at = now + timedelta(minutes=5)
    jobs["failed"].save()
    jobs["running"].lease_expires_at = now - timedelta(seconds=5)  # expired: stuck
    jobs["running"].save()
    job_in(Status.PENDING, name=NAME, queue=OTHER_QUEUE)  # an active queue beside the paused
    QueueState.objects.create(queue=QUEUE, paused_at=now, paused_by=f"{USER} (admin)")
    Worker.objects.create(
        id=WORKER, hostname=HOST, pid=1, queues=QUEUE, current_job_id=jobs["running"].pk
    )
    Worker.objects.create(
        id=IDLE_WORKER, hostname=HOST, pid=2, last_seen_at=now - timedelta(hours=1)
    )

    batch = JobBatch.objects.create(label=LABEL, closed_at=now, callback={"name": NAME})
    for status in ("completed", "dead", "pending", "running"):
        job_in(status, name=NAME, queue=QUEUE, batch=batch)
    JobBatch.objects.create(label=LABEL, parent=batch)

    schedule = Schedule.objects.create(
        key="zqdaily",
        job_name=NAME,
        cron="30 9 * * 1-5",
        declared_cron="30 9 * * 1-5",
        source=Schedule.Source.SETTINGS,
        next_run_at=now + timedelta(hours=1),
        last_run_at=now - timedelta(hours=1),
        last_job=jobs["completed"],
    )
    Schedule.objects.create(
        key="zqgone",
        job_name=NAME,
        cron="*/5 * * * *",
        declared_cron="*/5 * * * *",
        source=Schedule.Source.CODE,
        enabled=False,
        removed_at=now,
    )

    rows, samples = [], []
    for back in range(30):
        minute = rollups.minute_of((now - timedelta(minutes=back)).timestamp())
        for outcome in ("completed", "failed", "dead", "cancelled", "lost"):
            rows.append(
                JobRollup(
                    minute=minute,
                    queue=QUEUE,
                    name=NAME,
                    outcome=outcome,
                    count=10 if outcome == "completed" else 1,
                    duration_sum=2.0,
                    wait_b0=1,
                    wait_b4=1,
                )
            )
        samples.append(QueueSample(minute=minute, queue=QUEUE, pending=back, failed=1))
    JobRollup.objects.bulk_create(rows)
    QueueSample.objects.bulk_create(samples)
    return Made(jobs, batch, schedule)


def data_of(made: Made) -> list[str]:
    """Every value the pages show from the database: not text to translate."""
    values = [NAME, QUEUE, OTHER_QUEUE, LABEL, WORKER, IDLE_WORKER, HOST, USER, ERROR]
    values += ["zqboom", "zqkey", "zqdaily", "zqgone", *NAME.split(".")]
    values += ["@job"]  # the decorator, in "@job decorator" (where a schedule is declared)
    # The filters offer the registered job names and the default queue.
    values += [*registry.names(), get_settings().default_queue]
    # Job.__str__ (name #id (status)), in titles and breadcrumbs: the status is its value.
    jobs = Job.objects.all()
    values += [f"{NAME} #{job.pk} ({status.value})" for job in jobs for status in Status]
    # The detail page's reference (the id alone, for rows made without a nonce, is a number).
    values += [job.reference for job in jobs if job.ref_nonce is not None]
    return values


def post_action(url: str, action: str, pk: int) -> Callable[[Client], HttpResponse]:
    """The confirmation page of a bulk action (the action is not confirmed: nothing changes)."""
    data = {"action": action, ACTION_CHECKBOX_NAME: [str(pk)], "index": "0"}
    return lambda client: client.post(url, data)


def page_requests(made: Made) -> dict[str, Callable[[Client], HttpResponse]]:
    """What each page is: a request that changes nothing, so it can be made twice."""
    jobs, batch = made.jobs, made.batch
    batches = reverse("admin:django_sqlqueue_jobbatch_changelist")
    purge_old = reverse("admin:django_sqlqueue_job_purge_old")
    urls = {
        "job list": changelist_url(),
        "job list, filtered": changelist_url() + "?status__exact=running&stuck=yes",
        "dead job": change_url(jobs["dead"]),
        "running job": change_url(jobs["running"]),
        "pending job in a paused queue": change_url(jobs["pending"]),
        "dashboard": reverse("admin:django_sqlqueue_dashboard"),
        "dashboard, 24 hours": reverse("admin:django_sqlqueue_dashboard") + "?range=day",
        "worker list": reverse("admin:django_sqlqueue_worker_changelist"),
        "worker": reverse("admin:django_sqlqueue_worker_change", args=[WORKER]),
        "schedule list": reverse("admin:django_sqlqueue_schedule_changelist"),
        "schedule": reverse("admin:django_sqlqueue_schedule_change", args=[made.schedule.pk]),
        "queues": reverse("admin:django_sqlqueue_queuestate_changelist"),
        "batch list": batches,
        "batch": reverse("admin:django_sqlqueue_jobbatch_change", args=[batch.pk]),
        "confirm cancel of one job": operation_url(jobs["running"], "cancel"),
        "refused requeue of one job": operation_url(jobs["pending"], "requeue"),
        "purge form": purge_old,
    }
    requests: dict[str, Callable[[Client], HttpResponse]] = {
        what: (lambda client, url=url: client.get(url)) for what, url in urls.items()
    }
    requests["confirm requeue"] = post_action(changelist_url(), "requeue_selected", jobs["dead"].pk)
    requests["confirm cancel of batches"] = post_action(batches, "cancel_selected", batch.pk)
    purge = {"days": "0", "statuses": ["completed", "dead", "cancelled"], "queue": QUEUE}
    requests["purge count"] = lambda client: client.post(purge_old, purge)
    return requests


#: French each page must show: our strings, as the catalog translates them.
FRENCH = {
    "job list": ["Tâches par statut", "Purger les anciennes tâches…", "Tableau de bord",
                 "Par file", "Par blocage", "Remettre en file les tâches sélectionnées…",
                 "En attente", "En file", "Morte", "Réussie", "création", "fin",
                 "Plus ancienne tâche en file exécutable"],
    "job list, filtered": ["En cours au-delà de son bail", "1 tâche", "Tâches par statut"],
    "dead job": ["Dernière erreur", "Tentatives", "Tâches liées", "Pile d’appels",
                 "Clé d’idempotence", "tâches avec cette clé", "Remettre en file…",
                 "Remise en file après le n° 2 : l’exécution 2 commence ici",
                 "3 tentatives au total", "erreur", "perdue", "délai dépassé", "Priorité"],
    "running job": ["Cette tâche est en cours", "Expiration du bail",
                    "expiré : le worker a cessé de le renouveler", "Titulaire du bail"],
    "pending job in a paused queue": ["Contrôle de flux", "Raison de l’attente",
                                      # the queue and who paused it are data, left out
                                      "Sa file est en pause (depuis", ", par (admin))."],
    "dashboard": ["Tableau de bord de la file de tâches", "Dernière heure",
                  "Tentatives terminées par minute, par résultat", "Arriéré par file",
                  "Taux d’échec", "réussite", "échec, nouvel essai prévu", "échec définitif",
                  "annulation", "perte du worker", "Durée moyenne d’exécution",
                  "Noms de tâches avec le plus d’échecs", "taux d’échec jusqu’à"],
    "dashboard, 24 hours": ["Dernières 24 heures", "par tranche de 10 minutes"],
    "worker list": ["Par signal de vie", "Dernier signal de vie", "en vie", "périmé",
                    "Tâche en cours", "inoccupé", "hôte", "PID 1"],
    "worker": ["Tâches détenues", "Début"],
    "schedule list": ["en semaine à 09:30", "toutes les 5 minutes",
                      "désactivée : retirée du code", "Prochaine exécution",
                      "Dernière exécution", "toutes les tâches",
                      "Activer les planifications sélectionnées"],
    "schedule": ["Déclaration", "Exécutions", "Cron dans le code", "Échéances manquées",
                 "(celle de la tâche)", "En clair"],
    "queues": ["aucune tâche de la file ne démarre", "En pause", "Reprendre",
               "Mettre en pause", "motif (facultatif)", "Mettre en pause une autre file :",
               "En attente de dépendances", "En échec (nouvel essai prévu)"],
    "batch list": ["Fermé", "2 sur 4 membres terminés", "1 morte", "Par état", "rappel",
                   "pas encore", "Annuler les lots sélectionnés…", "dans lot n°"],
    "batch": ["Plus aucune tâche ne peut le rejoindre", "Les 4 membres dans la liste des tâches",
              "Tâche de rappel", "Lots enfants", "Fermeture", "Progression",
              "2 restants", "mise en file une fois tous les membres terminés"],
    "confirm cancel of one job": ["Annuler la tâche n° ", "Les tâches en cours sont priées",
                                  "Oui, annuler", "Non, revenir à la page précédente"],
    "refused requeue of one job": ["Cette tâche a le statut En file : « Remettre en file »",
                                   "Retour à la tâche"],
    "confirm requeue": ["Remettre en file : êtes-vous sûr ?",
                        "Ceci s’applique à 1 tâche sélectionnée.",
                        "Seules les tâches dont le statut est", "Oui, remettre en file"],
    "confirm cancel of batches": ["Annuler des lots : êtes-vous sûr ?",
                                  "Ceci s’applique à 1 lot sélectionné.",
                                  "2 sur 4 membres non terminés"],
    "purge form": ["Purger les tâches terminées", "Jours", "Statuts", "Vide : toutes les files.",
                   "Compter les tâches à purger"],
    "purge count": ["tâches correspondent", "tâches au statut Réussie, Morte ou Annulée de la "
                    "file « » terminées il y a plus de 0 jour", "Oui, les purger"],
}  # fmt: skip


class Visible(VisibleText):
    """test_translation's visible text, without code and JSON (`manage.py queues pause NAME`
    is a command line in any language), nor the magnifier icon of Django's own search form,
    whose alt="Search" Django does not translate (the job list has its own form)."""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("code", "pre"):
            self.hidden += 1
        if tag == "img" and (dict(attrs).get("src") or "").endswith("admin/img/search.svg"):
            return
        super().handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("code", "pre"):
            self.hidden -= 1
        super().handle_endtag(tag)


def words(text: str) -> str:
    """Whitespace (and the no-break spaces French puts before : ; ? !) as single spaces."""
    return " ".join(text.split())


def visible(html: str, data: list[str]) -> str:
    parser = Visible()
    parser.feed(html)
    text = " ".join(parser.parts)
    for value in sorted(data, key=len, reverse=True):
        text = text.replace(value, " ")
    return words(text)


def pattern_of(english: str) -> re.Pattern[str] | None:
    """A regex for an English message as a page shows it, placeholders standing for any
    value; None for one too short to be told from other text (`%(seconds)ss`)."""
    text = words(re.sub(r"<[^>]*>", " ", english))
    parts = [part.strip() for part in PLACEHOLDER.split(text)]
    while parts and not parts[0]:  # a value first or last: any text may stand there
        parts.pop(0)
    while parts and not parts[-1]:
        parts.pop()
    if max((len(w) for part in parts for w in re.findall(r"[A-Za-z]+", part)), default=0) < 3:
        return None
    literal = []
    for i, part in enumerate(parts):
        regex = r"\s+".join(map(re.escape, part.split()))
        if i == 0 and text[:1].islower():  # Django capitalizes labels and titles: either case
            regex = f"[{text[0]}{text[0].upper()}]{regex[1:]}"
        if re.match(r"\w", part):
            regex = r"(?<!\w)" + regex  # whole words: not `Purge` in `Purger`
        if re.search(r"\w$", part):
            regex += r"(?!\w)"
        literal.append(regex)
    # A value between two pieces of text: a short run of anything.
    return re.compile(r"\s*.{1,200}?\s*".join(literal))


@pytest.fixture(scope="module")
def english_patterns() -> dict[str, re.Pattern[str]]:
    """The catalog's English, each message or plural form whose French differs."""
    _, entries = read_catalog()
    patterns = {}
    for entry in entries:
        for english, french in entry.pairs():
            pattern = pattern_of(english) if english != french else None
            # Not one that its French also matches ("Pagination %(name)s", "Pagination des
            # %(name)s"): the page could not tell them apart.
            if pattern is not None and not pattern.search(french):
                patterns[english] = pattern
    return patterns


def test_a_pattern_finds_its_message_with_any_values():
    found = pattern_of("Requeued %(count)d of %(selected)d selected job.")
    assert found and found.search("x Requeued 2 of 3 selected job. y")
    assert not found.search("Requeued 2 of 3 selected jobs.")  # another message
    label = pattern_of("last heartbeat")
    assert label and label.search("Last heartbeat") and not label.search("Blast heartbeat")
    tagged = pattern_of("This acts on the <strong>%(count_text)s</strong> selected job.")
    assert tagged and tagged.search("This acts on the 1 selected job.")
    assert pattern_of("%(seconds)ss") is None and pattern_of("%(days)dd %(hours)dh") is None
    worker = pattern_of("waits for")  # a capital W, not a change to the \\w of the regex
    assert worker and worker.search("Waits for") and worker.search("waits for")
    value_first = pattern_of("%(count)s jobs")
    assert value_first and value_first.search("12 jobs") and not value_first.search("purgejobs")


def render(client: Client, request: Callable[[Client], HttpResponse], language: str) -> str:
    with translation.override(language):
        response = request(client)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.mark.parametrize("what", list(FRENCH))
def test_the_admin_page_in_french(what, staff, made, english_patterns):
    request = page_requests(made)[what]
    data = data_of(made)
    english = visible(render(staff, request, "en"), data)
    french = visible(render(staff, request, "fr"), data)
    missing = [text for text in FRENCH[what] if words(text) not in french]
    assert missing == [], f"{what}: no {missing} in\n{french}"
    shown = sorted(m for m, pattern in english_patterns.items() if pattern.search(english))
    assert len(shown) >= 10, f"{what}: the English page shows too few of the catalog’s strings"
    left = [m for m in shown if english_patterns[m].search(french)]
    assert left == [], f"{what}: English left in the French page: {left}\n{french}"


def test_the_check_finds_english_left_on_a_french_page(staff, made, english_patterns):
    """The test above can fail: an English message on the French page is found."""
    html = render(staff, page_requests(made)["job list"], "fr")
    french = visible(html.replace("</h1>", " Purge old jobs…</h1>", 1), data_of(made))
    assert "Purge old jobs…" in [m for m, p in english_patterns.items() if p.search(french)]


def test_every_page_has_its_french_check(made):
    assert set(page_requests(made)) == set(FRENCH)


def test_messages_after_actions_are_french(staff, made):
    with translation.override("fr"):
        done = staff.post(
            operation_url(made.jobs["dead"], "requeue"), {"confirmed": "yes"}, follow=True
        )
        history = staff.get(
            reverse("admin:django_sqlqueue_job_history", args=[made.jobs["dead"].pk])
        )
        paused = staff.post(
            reverse("admin:django_sqlqueue_queuestate_changelist"),
            {"queue": OTHER_QUEUE, "action": "pause"},
            follow=True,
        )
    assert "1 tâche remise en file." in words(visible(done.content.decode(), []))
    assert "Remise en file depuis l’administration (statut précédent : Morte)." in words(
        visible(history.content.decode(), [])
    )
    assert f"File {OTHER_QUEUE} mise en pause." in visible(paused.content.decode(), [])


# How a project turns it on ------------------------------------------------------------------


def with_locale_middleware() -> list[str]:
    from django.conf import settings

    middleware = list(settings.MIDDLEWARE)
    sessions = middleware.index("django.contrib.sessions.middleware.SessionMiddleware")
    middleware.insert(sessions + 1, "django.middleware.locale.LocaleMiddleware")
    return middleware


def test_the_browser_language_with_locale_middleware(staff, made):
    """A project with LocaleMiddleware: a browser that prefers French gets the admin in French."""
    # LocaleMiddleware activates the language it picks: the test's is put back after.
    with (
        translation.override(translation.get_language()),
        override_settings(MIDDLEWARE=with_locale_middleware()),
    ):
        french = staff.get(changelist_url(), headers={"accept-language": "fr-FR,fr;q=0.9"})
        english = staff.get(changelist_url(), headers={"accept-language": "en"})
    assert french["Content-Language"] == "fr"
    assert "Tâches par statut" in french.content.decode()
    assert english["Content-Language"] == "en"
    assert "Jobs per status" in english.content.decode()


def test_language_code_fr_without_middleware(staff, made):
    """A project whose LANGUAGE_CODE is "fr": the admin is French for everyone."""
    with override_settings(LANGUAGE_CODE="fr"):
        page = staff.get(reverse("admin:django_sqlqueue_dashboard")).content.decode()
    assert "Tableau de bord de la file de tâches" in page
