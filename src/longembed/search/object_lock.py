"""One build per index on S3: a lock object written with a conditional put, renewed while the build
runs and taken over once its holder has stopped renewing it (a killed build leaves it to expire).

S3 has no file lock, and Lance's own conditional commits let two appends to one table both succeed, so
two builds would interleave their rows.  The lock is ``PREFIX/build.lock``, a small JSON object naming
its holder and when it expires:

- acquire: ``PutObject`` with ``If-None-Match: *`` (only if no lock exists); if one exists and has not
  expired, the build is refused (:class:`~longembed.search.store.IndexBusyError`, naming the holder);
  if it has expired, ``PutObject`` with ``If-Match: <its ETag>`` replaces exactly that lock, so of two
  builds taking over the same dead lock, one wins and the other is refused;
- renew: every ``expiry / 3`` seconds a thread rewrites it (``If-Match`` its own ETag) with a later
  expiry; a failed renewal means another build took the lock, and the build stops before it moves the
  ``complete`` tag (:meth:`ObjectLock.check`);
- release: ``DeleteObject`` with ``If-Match`` its own ETag (never another holder's lock).

Credentials and endpoint come from the usual AWS environment variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``...), which LanceDB reads too.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from longembed.errors import MissingExtraError, UserError

try:  # the ``s3`` extra
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    BOTO3_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    BOTO3_IMPORT_ERROR = exc
    boto3 = None  # type: ignore[assignment]
    BotoCoreError = ClientError = Exception  # type: ignore[assignment,misc]

#: the lock object's name under the index's prefix
LOCK_OBJECT = "build.lock"
#: seconds a lock stays valid without renewal (a killed build's lock is taken over after this)
LOCK_EXPIRY_SECONDS = 60.0
#: the S3 error codes of a failed condition (If-None-Match on an existing object, If-Match on another ETag)
PRECONDITION_CODES = ("PreconditionFailed", "ConditionalRequestConflict", "412")


class IndexBusyError(UserError, BlockingIOError):
    """Another ``longembed index`` holds this index's build lock: a user error (exit 2), and still the
    ``BlockingIOError`` it always was for code that catches that."""


class LockLostError(UserError):
    """Another build took this build's lock (it was not renewed in time): this build stops before
    publishing anything."""


@dataclass(frozen=True)
class LockHolder:
    """What the lock object records: who holds it, and until when (seconds since the epoch)."""

    holder: str
    expires_at: float

    def to_json(self) -> bytes:
        return json.dumps({"holder": self.holder, "expires_at": self.expires_at}).encode()

    @staticmethod
    def from_json(body: bytes) -> LockHolder:
        """The holder a lock object records; an unreadable one counts as expired (a half-written or
        foreign object must not block every build forever)."""
        try:
            data = json.loads(body)
            return LockHolder(str(data["holder"]), float(data["expires_at"]))
        except (ValueError, KeyError, TypeError):
            return LockHolder("an unreadable lock object", 0.0)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key of the lock object) for an index at ``s3://bucket/prefix``."""
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise UserError(f"--index {uri}: not an s3://bucket/prefix URI")
    prefix = parsed.path.strip("/")
    return parsed.netloc, f"{prefix}/{LOCK_OBJECT}" if prefix else LOCK_OBJECT


def s3_client() -> Any:
    """A boto3 S3 client configured from the environment (as LanceDB is)."""
    if BOTO3_IMPORT_ERROR is not None:
        raise MissingExtraError("an index on s3:// needs boto3 for its build lock: pip install 'longembed[s3]' "
                                f"({BOTO3_IMPORT_ERROR})")
    return boto3.client("s3")


def failed_condition(exc: BaseException) -> bool:
    """Whether ``exc`` is S3's answer to a conditional request whose condition did not hold."""
    if not isinstance(exc, ClientError):
        return False
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return str(error.get("Code")) in PRECONDITION_CODES or status == 412


class ObjectLock:
    """The build lock of the index at ``uri`` (``s3://bucket/prefix``); see the module docstring."""

    def __init__(self, uri: str, expiry: float = LOCK_EXPIRY_SECONDS, client: Any = None) -> None:
        if expiry <= 0:
            raise UserError(f"the lock's expiry must be positive, got {expiry}")
        self.uri = uri
        self.bucket, self.key = split_s3_uri(uri)
        self.expiry = expiry
        self.client = client or s3_client()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._etag: str | None = None
        self._lost = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`~longembed.search.store.IndexBusyError` naming its holder."""
        try:
            try:
                self._etag = self._put(IfNoneMatch="*")
            except ClientError as exc:
                if not failed_condition(exc):
                    raise
                self._take_over_expired()
        except (BotoCoreError, ClientError) as exc:  # no bucket, no access, no answer
            raise UserError(f"--index {self.uri}: the build lock ({self.key}) could not be written ({exc}); check that "
                            "the bucket exists and the credentials and endpoint (AWS_ACCESS_KEY_ID, "
                            "AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL) are this store's") from None
        self._renewer = threading.Thread(target=self._renew_until_released, name="longembed-lock", daemon=True)
        self._renewer.start()

    def check(self) -> None:
        """A :class:`LockLostError` when another build has taken the lock since this one acquired it."""
        if self._lost:
            raise LockLostError(f"--index {self.uri}: another build took this build's lock ({self.key}) after it "
                                f"was not renewed for {self.expiry:g} s; nothing was published, run again when it ends")

    def release(self) -> None:
        """Stop renewing and delete the lock object, if it is still this build's."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self._etag is not None and not self._lost:
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self._etag)
            except ClientError as exc:
                if not failed_condition(exc):
                    raise
        self._etag = None

    def _put(self, **condition: str) -> str:
        record = LockHolder(self.holder, time.time() + self.expiry)
        answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=record.to_json(),
                                        ContentType="application/json", **condition)
        return str(answer["ETag"])

    def _take_over_expired(self) -> None:
        self._replace(self._read())

    def _read(self) -> tuple[LockHolder, str] | None:
        """The lock object's record and ETag (None when it is gone: released meanwhile)."""
        try:
            current = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                raise
            return None
        return LockHolder.from_json(current["Body"].read()), str(current["ETag"])

    def _replace(self, current: tuple[LockHolder, str] | None) -> None:
        """Put this build's lock in place of ``current`` (the lock read), if it has expired and is still
        the one there; else an IndexBusyError."""
        if current is None:
            condition = {"IfNoneMatch": "*"}
        else:
            recorded, etag = current
            left = recorded.expires_at - time.time()
            if left > 0:
                raise IndexBusyError(
                    f"--index {self.uri}: another longembed index is building this index now ({recorded.holder} "
                    f"holds {self.key} for {left:.0f} s more, renewed while it runs); wait until it finishes, then "
                    "run again")
            condition = {"IfMatch": etag}
        try:
            self._etag = self._put(**condition)
        except ClientError as exc:
            if not failed_condition(exc):
                raise
            raise IndexBusyError(f"--index {self.uri}: another longembed index took this index's lock ({self.key}) "
                                 "a moment ago; wait until it finishes, then run again") from None

    def renew(self) -> None:
        """Push the lock's expiry on (the renewing thread's tick); a failed condition means another
        build took the lock: :meth:`check` then raises."""
        assert self._etag is not None
        try:
            self._etag = self._put(IfMatch=self._etag)
        except ClientError as exc:
            if not failed_condition(exc):
                raise
            self._lost = True

    def _renew_until_released(self) -> None:
        while not self._lost and not self._stop.wait(self.expiry / 3):
            # a network error: try again at the next tick (the lock holds until it expires)
            with contextlib.suppress(BotoCoreError, ClientError):
                self.renew()
