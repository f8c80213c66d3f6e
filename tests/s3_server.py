"""A real S3-compatible server on 127.0.0.1 for the end-to-end tests: moto's
S3 (PyPI `moto`), every request serialised by one lock, because moto checks
`If-None-Match: *` and stores the object in two unlocked steps (two
concurrent conditional PUTs of one new key could both succeed; measured:
2 of 50 rounds of 64 writers). With the lock a conditional PUT is atomic,
as on AWS S3.

Credentials are enforced: an IAM user with an s3:* policy is created, and
its generated key is the only one accepted (a wrong secret gets 403
SignatureDoesNotMatch). A bucket is created for the tests.

Prints one JSON line {"endpoint", "key", "secret", "region", "bucket"} on
stdout, then serves until its stdin closes (the test process ended).

With --ignore-if-none-match the server plays a store without conditional
writes: it drops the If-None-Match header (and enforces no credentials,
since the header was signed), so a second create overwrites.

usage: s3_server.py BUCKET [--ignore-if-none-match]
"""
import json
import sys
import threading
import urllib.request

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

lock = threading.Lock()
inner = DomainDispatcherApplication(create_backend_app)


IGNORE = "--ignore-if-none-match" in sys.argv[2:]


def app(environ, start_response):
    if IGNORE:
        environ.pop("HTTP_IF_NONE_MATCH", None)
    with lock:
        return list(inner(environ, start_response))


def main():
    bucket = sys.argv[1]
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    region = "us-east-1"
    setup = dict(endpoint_url=endpoint, region_name=region,
                 aws_access_key_id="setup", aws_secret_access_key="setup")
    iam = boto3.client("iam", **setup)
    iam.create_user(UserName="idem-test")
    iam.put_user_policy(
        UserName="idem-test", PolicyName="s3all",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="idem-test")["AccessKey"]
    boto3.client("s3", **setup).create_bucket(Bucket=bucket)
    if not IGNORE:
        # From here on every request must be signed with the user's key.
        req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0",
                                     headers={"Content-Type": "text/plain"}, method="POST")
        urllib.request.urlopen(req).read()
    print(json.dumps({"endpoint": endpoint, "key": key["AccessKeyId"],
                      "secret": key["SecretAccessKey"], "region": region,
                      "bucket": bucket}), flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
