"""A real S3 API for tests: moto's server mode on a free loopback port.

The server runs in a thread of the test process and speaks HTTP, so pyarrow's S3 client,
boto3, pylance (Rust ``object_store``) and Spark's Python workers (separate processes) all
reach it the same way they would reach S3. Each test gets a bucket of its own.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


@dataclass
class S3Server:
    endpoint: str

    def options(self) -> dict[str, str]:
        """Storage options with Lance's keys, accepted by this engine and by pylance alike."""
        return {
            "aws_endpoint": self.endpoint, "allow_http": "true", "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY, "aws_region": REGION,
        }

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def new_bucket(self) -> str:
        name = f"t-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        paginator = self.client().get_paginator("list_objects_v2")
        return [o["Key"] for page in paginator.paginate(Bucket=bucket, Prefix=prefix) for o in page.get("Contents", [])]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server():
    pytest.importorskip("boto3", reason="boto3 is not installed (pip install -e '.[test]')")
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[test]')")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    port = _free_port()
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, S3Server(f"http://127.0.0.1:{port}")


def moto_auth(endpoint: str, enabled: bool) -> None:
    """Turn moto's IAM checks of every request's key and signature on or off (server-wide)."""
    import urllib.request

    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=(b"0" if enabled else b"inf"),
                                     method="POST", headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(request).read()


def iam_access_keys(s3: S3Server, user: str, count: int) -> list[dict[str, str]]:
    """``count`` access keys of a new IAM user allowed everything (as Lance option keys)."""
    import json

    import boto3

    iam = boto3.client("iam", endpoint_url=s3.endpoint, aws_access_key_id=ACCESS_KEY,
                       aws_secret_access_key=SECRET_KEY, region_name=REGION)
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    keys = [iam.create_access_key(UserName=user)["AccessKey"] for _ in range(count)]
    return [{"aws_access_key_id": k["AccessKeyId"], "aws_secret_access_key": k["SecretAccessKey"]} for k in keys]


def delete_access_key(s3: S3Server, user: str, key: dict[str, str], *, using: dict[str, str]) -> None:
    import boto3

    boto3.client("iam", endpoint_url=s3.endpoint, aws_access_key_id=using["aws_access_key_id"],
                 aws_secret_access_key=using["aws_secret_access_key"], region_name=REGION,
                 ).delete_access_key(UserName=user, AccessKeyId=key["aws_access_key_id"])


def dynamodb_client(endpoint: str):
    """A boto3 DynamoDB client of the moto server at ``endpoint`` (the static test keys)."""
    import boto3

    return boto3.client("dynamodb", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name=REGION)


def server_with_manifest_table(table: str) -> Iterator[S3Server]:
    """Body of a module fixture: a moto server holding the DynamoDB manifest table ``table``,
    stopped when the fixture ends."""
    server, info = start_server()
    create_manifest_table(info.endpoint, table)
    yield info
    server.stop()


def create_manifest_table(endpoint: str, name: str, hash_key: str = "base_uri", range_key: str = "version") -> None:
    """A DynamoDB table of Lance's external manifest store layout: HASH base_uri (string), RANGE
    version (number). moto keeps its state per process, so a table made by another module's
    server may exist already: then nothing is done."""
    client = dynamodb_client(endpoint)
    if name in client.list_tables()["TableNames"]:
        return
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": hash_key, "KeyType": "HASH"}, {"AttributeName": range_key, "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": hash_key, "AttributeType": "S"},
                              {"AttributeName": range_key, "AttributeType": "N"}])
