import django

if django.VERSION >= (6, 0):
    from django.tasks import task
else:
    from django_tasks import task


@task
def hello() -> str:
    return "hello"
