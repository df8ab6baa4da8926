from django.db import models


class Customer(models.Model):
    email = models.EmailField(unique=True)
    welcomed = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.email
