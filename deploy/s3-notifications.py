#!/usr/bin/env python3
"""Sets up notification mode for one S3 prefix: a dead-letter queue, a queue that sends a
message there after 5 receives (in the bucket's region), a queue policy letting only the bucket send to it, and the
bucket's ObjectCreated events under the prefix into the queue. Prints the queue's URL.

Needs boto3 (`python3 -m pip install boto3`) and the usual AWS_* credentials. The endpoint
is AWS_ENDPOINT_URL when set (a local moto, MinIO), else AWS's; --endpoint-url overrides.

The bucket's notification configuration is REPLACED by this one: merge in what
`get_bucket_notification_configuration` returns first if the bucket has one. Running it
again with the same arguments changes nothing.
"""

import argparse
import json
import os
import sys

import boto3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True, help="the source prefix, e.g. landing/orders/")
    p.add_argument("--queue", required=True, help="the queue's name (the DLQ is NAME-dlq)")
    p.add_argument("--region", help="the queue's region (default: the bucket's, as S3 needs)")
    p.add_argument("--visibility-timeout", default="60", help="seconds (default 60)")
    p.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"))
    a = p.parse_args()

    def client(service, region):
        return boto3.client(service, region_name=region, endpoint_url=a.endpoint_url)

    s3 = client("s3", a.region)
    location = s3.get_bucket_location(Bucket=a.bucket)["LocationConstraint"]
    a.region = a.region or location or "us-east-1"
    sqs = client("sqs", a.region)
    account = client("sts", a.region).get_caller_identity()["Account"]
    arn = lambda name: f"arn:aws:sqs:{a.region}:{account}:{name}"  # noqa: E731

    sqs.create_queue(QueueName=f"{a.queue}-dlq")
    redrive = {"deadLetterTargetArn": arn(f"{a.queue}-dlq"), "maxReceiveCount": "5"}
    url = sqs.create_queue(
        QueueName=a.queue,
        Attributes={
            "VisibilityTimeout": a.visibility_timeout,
            "RedrivePolicy": json.dumps(redrive),
        },
    )["QueueUrl"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "s3.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": arn(a.queue),
                "Condition": {
                    "ArnLike": {"aws:SourceArn": f"arn:aws:s3:::{a.bucket}"},
                    "StringEquals": {"aws:SourceAccount": account},
                },
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    s3.put_bucket_notification_configuration(
        Bucket=a.bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "Id": f"autoloader-{a.queue}",
                    "QueueArn": arn(a.queue),
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": a.prefix}]}},
                }
            ]
        },
    )
    print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
