from django.core.mail import send_mail

from django_sqlqueue import job

from .models import Customer


@job("bookshop.send_welcome_email", queue="mail", max_attempts=3)
def send_welcome_email(customer_id: int, greeting: str = "Welcome") -> None:
    customer = Customer.objects.get(pk=customer_id)
    send_mail(f"{greeting}!", "Thanks for signing up.", None, [customer.email])
    Customer.objects.filter(pk=customer_id).update(welcomed=True)


@job("bookshop.sync_stock", max_attempts=2)
def sync_stock(isbn: str) -> None:
    raise ConnectionError(f"the warehouse did not answer for {isbn}")
