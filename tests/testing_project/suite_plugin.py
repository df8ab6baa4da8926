"""The bookshop's tests in pytest style, with the fixtures of django-sqlqueue's plugin."""

import pytest
from bookshop.jobs import sync_stock
from bookshop.models import Customer
from django.core import mail


@pytest.mark.django_db
def test_signup_enqueues_the_welcome_email(client, sqlqueue):
    client.post("/signup/", {"email": "ada@example.com"})
    customer = Customer.objects.get()
    sqlqueue.assert_enqueued("bookshop.send_welcome_email", customer_id=customer.pk)
    assert mail.outbox == []  # not sent before a worker runs the job


@pytest.mark.django_db
def test_the_welcome_email_is_sent_when_the_job_runs(client, sqlqueue):
    client.post("/signup/", {"email": "ada@example.com"})
    [ran] = sqlqueue.run_jobs()
    assert ran.status == "completed"
    assert [message.to for message in mail.outbox] == [["ada@example.com"]]
    assert Customer.objects.get().welcomed


@pytest.mark.django_db(transaction=True)
def test_a_failing_job_is_retried_later(sqlqueue):
    sync_stock.enqueue("978-0-00-000000-0")
    [ran] = sqlqueue.run_jobs()
    assert (ran.status, ran.attempts) == ("failed", 1)
    assert "the warehouse did not answer" in ran.last_error


def test_captured_jobs(captured_jobs, client):
    client.post("/signup/", {"email": "grace@example.com"})
    assert captured_jobs.names() == ["bookshop.send_welcome_email"]
