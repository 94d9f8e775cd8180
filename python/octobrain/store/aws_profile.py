"""AWS keys for octobrain's own requests to a bucket (the write lease, the `_octobrain/*`
records), found where LanceDB finds them: obstore reads only the environment and an instance
role, LanceDB (the AWS SDK's chain) also a profile of ~/.aws/credentials and ~/.aws/config
(`AWS_PROFILE`, `AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`; SSO, `credential_process`,
assumed roles). botocore's chain reads those; what obstore reads itself is left to it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from octobrain.errors import StorageError
from octobrain.store.endpoint import no_credentials

# The links of botocore's chain obstore follows itself (the environment's keys, a container's
# or an instance's role): left to it, so a machine without a profile asks as it did.
_OBSTORE_READS = ("env", "container-role", "iam-role")
# Keys from a source that renews them (SSO, an assumed role) are asked for again this often;
# botocore hands out the cached ones until they near their expiry.
_RENEWED_EVERY = timedelta(minutes=5)


def s3_settings(store: object, config: Mapping[str, str]) -> tuple[dict[str, str], Any]:
    """(the options to add to `config`, a credential provider or None) for the S3 store
    `store`: None where keys are in `config` or the environment, or no profile holds any."""
    keys = {key.lower().removeprefix("aws_") for key in config}
    if "access_key_id" in keys or os.environ.get("AWS_ACCESS_KEY_ID"):
        return {}, None
    import botocore.session
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    session = botocore.session.Session()
    try:
        resolver = session.get_component("credential_provider")
        for name in _OBSTORE_READS:
            resolver.remove(name)
        credentials = resolver.load_credentials()
        region = session.get_config_variable("region")
    except BotoCoreError as exc:  # (a profile named that no file holds, a broken file)
        said = "" if isinstance(exc, ProfileNotFound) else f" ({exc})"
        raise StorageError(f"store: cannot open {store}: {no_credentials()}{said}") from None
    if credentials is None:
        return {}, None
    added = {}
    if region and "region" not in keys and not _region_in_environment():
        added["region"] = region  # (the profile's, as LanceDB takes it)
    return added, _Provider(credentials)


def _region_in_environment() -> bool:
    return bool(os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))


class _Provider:
    """obstore's credential callback over botocore's credentials (renewed by botocore)."""

    def __init__(self, credentials: Any) -> None:
        self._credentials = credentials
        self._renewed = hasattr(credentials, "refresh_needed")

    def __call__(self) -> dict[str, Any]:
        frozen = self._credentials.get_frozen_credentials()
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": datetime.now(UTC) + _RENEWED_EVERY if self._renewed else None,
        }
