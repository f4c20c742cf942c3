"""The objects of an index on S3, read and written for :mod:`longembed.search.version_files` (its only
caller), each failure of the store one line naming the index.  Kept apart so that a local search never
imports boto3 (a third of a second).

What it does: small reads and writes, uploads and downloads of files, listings and deletes under the
index's prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from longembed.errors import UserError
from longembed.search.object_lock import BotoCoreError, ClientError, s3_client

#: objects deleted per DeleteObjects request (S3's limit)
DELETE_BATCH = 1000
#: the error codes of S3's answer that an object does not exist (not the bucket: that is the store's failure)
NOT_FOUND_CODES = ("NoSuchKey", "404", "NotFound")


class S3Objects:
    """The objects under the prefix of the index at ``s3://bucket/prefix``; keys are relative to it.
    Credentials and endpoint from the usual AWS environment variables (as LanceDB and the build lock)."""

    def __init__(self, uri: str | Path) -> None:
        parsed = urlparse(str(uri))
        self.uri = str(uri)
        self.bucket = parsed.netloc
        prefix = parsed.path.strip("/")
        self.prefix = f"{prefix}/" if prefix else ""
        with self.answers():
            self.client = s3_client()

    def read(self, key: str) -> bytes | None:
        """The object's bytes, None when there is no such object."""
        with self.answers():
            try:
                return bytes(self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read())
            except ClientError as exc:
                if not_found(exc):
                    return None
                raise

    def write(self, key: str, body: bytes) -> None:
        """Put one object (one PUT: a reader sees the old object or this one, whole)."""
        with self.answers():
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body)

    def upload(self, key: str, file: Path) -> None:
        with self.answers():
            self.client.upload_file(str(file), self.bucket, self.prefix + key)

    def download(self, key: str, file: Path) -> None:
        """Download the object to ``file``; a FileNotFoundError when there is no such object."""
        with self.answers():
            try:
                self.client.download_file(self.bucket, self.prefix + key, str(file))
            except ClientError as exc:
                if not_found(exc):
                    raise FileNotFoundError(2, "no such object", self.prefix + key) from None
                raise

    def sizes(self, under: str) -> dict[str, int]:
        """Key -> size of every object whose key starts with ``under``."""
        found: dict[str, int] = {}
        with self.answers():
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + under)
            for page in pages:
                found.update({o["Key"][len(self.prefix):]: int(o["Size"]) for o in page.get("Contents", [])})
        return found

    def delete(self, keys: list[str]) -> None:
        with self.answers():
            for start in range(0, len(keys), DELETE_BATCH):
                objects = [{"Key": self.prefix + key} for key in keys[start : start + DELETE_BATCH]]
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})

    @contextmanager
    def answers(self) -> Iterator[None]:
        """The store's failures (no bucket, no access, no answer) as one line naming the index."""
        try:
            yield
        except (BotoCoreError, ClientError) as exc:
            detail = " ".join(str(exc).split())[:160]
            raise UserError(f"--index {self.uri}: the object store did not answer as an index there ({detail}); "
                            "check that the bucket exists and the credentials and endpoint (AWS_ACCESS_KEY_ID, "
                            "AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL) are this store's") from None


def not_found(exc: Any) -> bool:
    """Whether a ClientError is S3's answer that the object does not exist."""
    return str(exc.response.get("Error", {}).get("Code")) in NOT_FOUND_CODES
