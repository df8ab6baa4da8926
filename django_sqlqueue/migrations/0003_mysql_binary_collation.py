"""MySQL/MariaDB compare strings case-, accent- and trailing-space-insensitively by default:
`Key` and `key ` would be one idempotency key, and a worker for queue `mail` would take
`MAIL` jobs. A binary, no-pad collation makes these columns compare exactly, as on
PostgreSQL and SQLite. Other databases are left as they are; the model state is unchanged."""

from django.db import migrations

COLUMNS = {
    "name": "varchar(255) NOT NULL",
    "queue": "varchar(100) NOT NULL",
    "idempotency_key": "varchar(255) NULL",
}


def exact_comparison(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    # Binary and NO PAD: utf8mb4_bin would still ignore trailing spaces.
    collation = "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"
    quote = schema_editor.quote_name
    changes = ", ".join(
        f"MODIFY {quote(column)} {kind.split(' ', 1)[0]} CHARACTER SET utf8mb4 "
        f"COLLATE {collation} {kind.split(' ', 1)[1]}"
        for column, kind in COLUMNS.items()
    )
    schema_editor.execute(f"ALTER TABLE {quote('django_sqlqueue_job')} {changes}")


def default_comparison(apps, schema_editor):
    if schema_editor.connection.vendor != "mysql":
        return
    quote = schema_editor.quote_name
    changes = ", ".join(f"MODIFY {quote(column)} {kind}" for column, kind in COLUMNS.items())
    schema_editor.execute(f"ALTER TABLE {quote('django_sqlqueue_job')} {changes}")


class Migration(migrations.Migration):
    # DDL cannot run inside a transaction on MySQL.
    atomic = False
    dependencies = [("django_sqlqueue", "0002_status_id_index")]

    operations = [migrations.RunPython(exact_comparison, default_comparison, atomic=False)]
