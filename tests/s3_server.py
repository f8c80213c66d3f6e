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

With --delay-ms N every request waits N ms before it is served (outside
the lock, so concurrent requests overlap as on a real store): the
per-request latency of a remote object store, made visible.

Every request to the bucket is counted by method; `GET /_idem/requests`
(unsigned, not counted) answers the counts since the last
`POST /_idem/requests` (which answers them too, then resets them): {"GET": n, "PUT": n, ...,
"keys": {"GET _delta_log/...": n}} with the paths of the bucket's keys
grouped by folder, so a test can say which requests a run made. A LIST
(`GET /BUCKET?list-type=2`) also counts the keys it answered, as "LISTED"
and "LISTED <prefix's folder>": how many entries of a listing a run read
(a LIST page holds up to 1,000).
`POST /_idem/in-flight` (likewise uncounted) answers {"max": n, "now": k}:
the most requests the server held at once since the last such call (the
delay included), then starts counting again from those in flight now; a
test asserts with it that a client sent its requests concurrently.

usage: s3_server.py BUCKET [--ignore-if-none-match] [--delay-ms N]
"""
import collections
import json
import sys
import threading
import time
import urllib.parse
import urllib.request

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

lock = threading.Lock()
inner = DomainDispatcherApplication(create_backend_app)


IGNORE = "--ignore-if-none-match" in sys.argv[2:]
DELAY = 0.0
if "--delay-ms" in sys.argv[2:]:
    DELAY = float(sys.argv[sys.argv.index("--delay-ms") + 1]) / 1000.0

counts_lock = threading.Lock()
counts = collections.Counter()
in_flight = {"now": 0, "max": 0}


def folder(path):
    """The request's key without the bucket, cut to its folder (data file
    names, commit numbers and uuids vary; `_delta_log/` and `_idem/` do
    not)."""
    parts = path.lstrip("/").split("/")[1:]
    return "/".join(parts[:-1]) + "/" if len(parts) > 1 else "/".join(parts)


def stats(environ, start_response):
    with counts_lock:
        body = {k: v for k, v in counts.items() if " " not in k}
        body["keys"] = {k: v for k, v in counts.items() if " " in k}
        if environ["REQUEST_METHOD"] == "POST":
            counts.clear()
    data = json.dumps(body).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(data)))])
    return [data]


def most_in_flight(environ, start_response):
    with counts_lock:
        data = json.dumps(in_flight).encode()
        in_flight["max"] = in_flight["now"]
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(data)))])
    return [data]


def count_listed(environ, body):
    """Count the keys a LIST answered, in all and by the listed folder."""
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    if environ["REQUEST_METHOD"] != "GET" or "list-type" not in query:
        return
    listed = sum(chunk.count(b"<Key>") for chunk in body)
    prefix = query.get("prefix", [""])[0]
    with counts_lock:
        counts["LISTED"] += listed
        counts[f"LISTED {prefix.rsplit('/', 1)[0]}/"] += listed


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/_idem/requests":
        return stats(environ, start_response)
    if path == "/_idem/in-flight":
        return most_in_flight(environ, start_response)
    method = environ["REQUEST_METHOD"]
    with counts_lock:
        counts[method] += 1
        counts[f"{method} {folder(path)}"] += 1
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
    try:
        if DELAY:
            time.sleep(DELAY)
        if IGNORE:
            environ.pop("HTTP_IF_NONE_MATCH", None)
        with lock:
            body = list(inner(environ, start_response))
        count_listed(environ, body)
        return body
    finally:
        with counts_lock:
            in_flight["now"] -= 1


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
