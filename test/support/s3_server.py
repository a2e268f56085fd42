#!/usr/bin/env python3
"""An S3-compatible server for the blob store tests: moto's server on a free loopback port, with
signature checking on.

moto checks SigV4 signatures only once its "initial no-auth action count" is used up: it then recomputes
each request's signature with the secret of the access key named in the Authorization header (keys made
through its IAM API) and answers 403 (SignatureDoesNotMatch, InvalidAccessKeyId) otherwise. This script
makes an IAM user allowed s3:*, its access key and the bucket while checking is off, then turns it on
(as POST /moto-api/reset-auth would) and writes {"port", "access_key", "secret_key", "bucket"} to the ready
file. It exits after --max-lifetime seconds; exit code 3 means moto (or boto3) is not importable.

usage: s3_server.py --ready FILE --bucket NAME [--max-lifetime SECONDS]
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ready", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--max-lifetime", type=float, default=600)
    a = ap.parse_args()
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as e:
        print(f"s3_server: cannot import moto[server] / boto3: {e}", file=sys.stderr)
        return 3
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    endpoint = f"http://127.0.0.1:{port}"
    kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
              aws_secret_access_key="setup")
    iam = boto3.client("iam", **kw)
    iam.create_user(UserName="sandlet-test")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName="sandlet-test", PolicyName="s3", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="sandlet-test")["AccessKey"]
    boto3.client("s3", **kw).create_bucket(Bucket=a.bucket)
    # From here on every request must carry a valid signature of a key IAM knows (what POST
    # /moto-api/reset-auth does; the server runs in this process).
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"port": port, "access_key": key["AccessKeyId"], "secret_key": key["SecretAccessKey"],
                   "bucket": a.bucket}, f)
    os.rename(tmp, a.ready)
    time.sleep(a.max_lifetime)
    print("s3_server: max lifetime reached, exiting", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
