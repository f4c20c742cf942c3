"""The build lock on S3 (issue 53, item 6): a lock object taken with a conditional put, refused while its
holder renews it, taken over once it expired, and lost when another build took it over (moto's
in-process S3, the same conditional-request rules as its server)."""

from __future__ import annotations

import json
import time

import boto3
import pytest
from moto import mock_aws

from longembed.cli.main import build_parser
from longembed.errors import UserError
from longembed.search.following import FOLLOW_SECONDS
from longembed.search.object_lock import LockHolder, LockLostError, ObjectLock, split_s3_uri
from longembed.search.store import IndexBusyError, IndexStore, remote_scheme

BUCKET = "an-index-bucket"
URI = f"s3://{BUCKET}/team/my-index"


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        yield s3


def recorded(s3) -> LockHolder:
    return LockHolder.from_json(s3.get_object(Bucket=BUCKET, Key="team/my-index/build.lock")["Body"].read())


def test_a_second_build_is_refused_while_the_first_holds_the_lock(client) -> None:
    first = ObjectLock(URI, expiry=60, client=client)
    first.acquire()
    try:
        assert recorded(client).holder == first.holder
        with pytest.raises(IndexBusyError, match=rf"--index {URI}: another longembed index is building .*{first.holder}"):
            ObjectLock(URI, expiry=60, client=client).acquire()
    finally:
        first.release()
    assert client.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0  # released: the object is gone
    again = ObjectLock(URI, expiry=60, client=client)
    again.acquire()
    again.release()


def test_a_dead_holders_lock_is_taken_over_once_it_expired(client) -> None:
    def left_by_a_killed_build(expires_at: float) -> None:
        client.put_object(Bucket=BUCKET, Key="team/my-index/build.lock",
                          Body=json.dumps({"holder": "killed:1", "expires_at": expires_at}).encode())

    left_by_a_killed_build(time.time() + 3600)
    with pytest.raises(IndexBusyError, match="killed:1 holds"):
        ObjectLock(URI, client=client).acquire()
    left_by_a_killed_build(time.time() - 1)  # the same lock, an hour later: expired
    taker = ObjectLock(URI, client=client)
    taker.acquire()
    try:
        assert recorded(client).holder == taker.holder
        taker.check()
    finally:
        taker.release()


def test_of_two_builds_taking_over_one_expired_lock_only_one_gets_it(client) -> None:
    client.put_object(Bucket=BUCKET, Key="team/my-index/build.lock",
                      Body=json.dumps({"holder": "killed:1", "expires_at": 0}).encode())
    first, second = ObjectLock(URI, client=client), ObjectLock(URI, client=client)
    seen_by_first, seen_by_second = first._read(), second._read()  # both read the dead lock
    first._replace(seen_by_first)
    with pytest.raises(IndexBusyError, match="took this index's lock .* a moment ago"):
        second._replace(seen_by_second)
    assert recorded(client).holder == first.holder
    first.release()


def test_a_build_whose_lock_was_taken_over_stops_before_publishing(client) -> None:
    frozen = ObjectLock(URI, expiry=60, client=client)
    frozen._replace(None)  # acquired, its renewing thread never started (a build frozen past its expiry)
    answer = client.put_object(Bucket=BUCKET, Key="team/my-index/build.lock", IfMatch=frozen._etag,
                               Body=json.dumps({"holder": frozen.holder, "expires_at": 0}).encode())
    frozen._etag = answer["ETag"]  # what it wrote last: an expiry now past
    taker = ObjectLock(URI, expiry=60, client=client)
    taker.acquire()
    frozen.check()  # nothing noticed yet
    frozen.renew()  # its next renewal finds another holder's lock
    with pytest.raises(LockLostError, match="another build took this build's lock"):
        frozen.check()
    frozen.release()  # never deletes the taker's lock
    assert recorded(client).holder == taker.holder
    taker.release()


def test_a_lock_is_renewed_while_the_build_runs(client) -> None:
    lock = ObjectLock(URI, expiry=1.5, client=client)
    lock.acquire()
    try:
        first = recorded(client).expires_at
        time.sleep(1.0)  # two renewal ticks (every 0.5 s)
        assert recorded(client).expires_at > first
        with pytest.raises(IndexBusyError):
            ObjectLock(URI, client=client).acquire()
        lock.check()
    finally:
        lock.release()


@pytest.mark.parametrize(("uri", "scheme"), [("s3://b/x", "s3"), ("gs://b/x", "gs"), ("az://b/x", "az"),
                                             ("my-index", None), ("/tmp/idx", None)])
def test_index_uris_name_their_store(uri: str, scheme: str | None) -> None:
    assert remote_scheme(uri) == scheme


@pytest.mark.parametrize("uri", ["http://host/x", "memory://x", "s3://", "db://x"])
def test_another_scheme_is_a_one_line_error(uri: str) -> None:
    with pytest.raises(UserError, match=r"give a folder or an object-storage URI \(s3://bucket/prefix"):
        IndexStore(uri)


def test_the_lock_object_sits_under_the_index_prefix() -> None:
    assert split_s3_uri("s3://bucket/a/b/") == ("bucket", "a/b/build.lock")
    assert split_s3_uri("s3://bucket") == ("bucket", "build.lock")


@pytest.mark.parametrize("command", [["serve"], ["search", "a question"], ["index", "docs"]])
def test_an_index_uri_reaches_the_command_as_given(command: list[str]) -> None:
    """``serve --index`` parsed it as a Path, which turns ``s3://bucket/x`` into ``s3:/bucket/x``."""
    argv = [*command, "--index", "s3://bucket/team/index"]
    assert build_parser(argv).parse_args(argv).index == "s3://bucket/team/index"


def test_the_serve_flags_default_is_the_following_index_default() -> None:
    argv = ["serve", "--index", "my-index"]
    assert build_parser(argv).parse_args(argv).follow_seconds == FOLLOW_SECONDS


def test_a_bucket_that_does_not_exist_is_one_line_when_the_build_takes_its_lock(client) -> None:
    lock = ObjectLock("s3://no-such-bucket-here/index", client=client)
    with pytest.raises(UserError, match=r"--index s3://no-such-bucket-here/index: the build lock \(index/build\.lock\) "
                                        r"could not be written \(.*NoSuchBucket.*check that the bucket exists"):
        lock.acquire()
