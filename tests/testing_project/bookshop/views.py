from django.db import transaction
from django.http import HttpRequest, HttpResponse

from .jobs import send_welcome_email
from .models import Customer


def signup(request: HttpRequest) -> HttpResponse:
    with transaction.atomic():
        customer = Customer.objects.create(email=request.POST["email"])
        send_welcome_email.enqueue(customer.pk)
    return HttpResponse(status=201)
