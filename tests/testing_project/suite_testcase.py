"""The bookshop's tests as a Django TestCase, with the plain functions."""

from bookshop.models import Customer
from django.core import mail
from django.db import IntegrityError
from django.test import TestCase

from django_sqlqueue.testing import assert_enqueued, assert_not_enqueued, captured_jobs, run_jobs


class SignupTests(TestCase):
    def test_signup_sends_a_welcome_email(self):
        with captured_jobs() as captured:
            self.client.post("/signup/", {"email": "ada@example.com"})
        self.assertEqual(captured.names(), ["bookshop.send_welcome_email"])
        customer = Customer.objects.get()
        assert_enqueued("bookshop.send_welcome_email", customer.pk, greeting="Welcome")

        ran = run_jobs(queue="mail")

        self.assertEqual([job.status for job in ran], ["completed"])
        self.assertEqual(len(mail.outbox), 1)
        assert_not_enqueued("bookshop.send_welcome_email")

    def test_a_rolled_back_signup_enqueues_nothing(self):
        Customer.objects.create(email="ada@example.com")
        with captured_jobs() as captured, self.assertRaises(IntegrityError):
            self.client.post("/signup/", {"email": "ada@example.com"})
        self.assertEqual(len(captured), 0)
