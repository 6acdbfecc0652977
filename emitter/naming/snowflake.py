"""Snowflake datasets: the account identifier as the spec names it."""
from __future__ import annotations

import re

# --------------------------------------------------------------------------------------------
# Snowflake
# --------------------------------------------------------------------------------------------


def snowflake_namespace(account: str) -> str:
    """``snowflake://{org}-{account}`` or ``snowflake://{locator}.{region}.{cloud}``, lower-case.

    Port of the Java client's ``SnowflakeUtils.parseAccountIdentifier`` (the spec's rule): strips
    ``https://`` and ``.snowflakecomputing.com``; ``org-acct`` (a hyphen and no dots) is kept;
    a bare locator gets ``.us-west-1.aws`` (Snowflake's default region), ``locator.region`` gets
    ``.aws``. Lower-cased on top of the Java rule (Snowflake account identifiers are
    case-insensitive; Airflow's provider lower-cases too) so ``MYORG-ACCT`` from
    ``CURRENT_ORGANIZATION_NAME()`` and a lower-case connector URL meet.
    """
    url = account.strip()
    url = re.sub(r"(?i)^https?://", "", url)
    domain = url.lower().find(".snowflakecomputing.com")
    if domain > 0:
        url = url[:domain]
    url = url.split("/", 1)[0].split(":", 1)[0].lower()
    parts = url.split(".")
    if len(parts) == 1 and "-" in parts[0]:
        ident = parts[0]  # organization-account
    elif len(parts) == 1:
        ident = f"{parts[0]}.us-west-1.aws"
    elif len(parts) == 2:
        ident = f"{url}.aws"
    else:
        ident = url
    return f"snowflake://{ident}"
