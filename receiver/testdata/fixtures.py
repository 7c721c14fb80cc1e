"""Writes receiver/testdata/<provider>.json: provider deliveries as API Gateway's HTTP API hands
them to Lambda (payload format 2.0).

Nothing here comes from oncehook's own code. The envelope is AWS's sample event from
aws-lambda-go (events/testdata/apigw-v2-request-no-authorizer.json, the version go.mod pins),
with the route, path, method, headers and body of each delivery put in; the signatures are
computed with Python's hmac and hashlib from each provider's documented format. Run from the
repository root:

    python3 receiver/testdata/fixtures.py "$(go list -m -f '{{.Dir}}' github.com/aws/aws-lambda-go)"
"""
import base64, copy, hashlib, hmac, json, sys

sample_path = sys.argv[1] + "/events/testdata/apigw-v2-request-no-authorizer.json"
sample = json.load(open(sample_path))

SIGNED_AT = 1787649244  # 2026-08-25T09:14:04Z, receiver's fixtureTime
SECRETS = {  # receiver/env_test.go testSecrets
    "shop": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "stripe": "whsec_test_stripe_0123456789abcdef",
    "github": "It's a Secret to Everybody",
    "shopify": "shpss_test_0123456789abcdef",
}
mac = lambda key, msg: hmac.new(key, msg, hashlib.sha256).digest()


def standard_webhooks(secret, msg_id, body):
    # https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
    key = base64.b64decode(secret.removeprefix("whsec_"))
    sig = mac(key, f"{msg_id}.{SIGNED_AT}.".encode() + body)
    return {"webhook-id": msg_id, "webhook-timestamp": str(SIGNED_AT), "webhook-signature": "v1," + base64.b64encode(sig).decode()}


def stripe(secret, body):
    # https://docs.stripe.com/webhooks#verify-manually
    return {"stripe-signature": f"t={SIGNED_AT},v1=" + mac(secret.encode(), f"{SIGNED_AT}.".encode() + body).hex()}


def github(secret, body):
    # https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
    return {"x-hub-signature-256": "sha256=" + mac(secret.encode(), body).hex()}


def shopify(secret, body):
    # https://shopify.dev/docs/apps/build/webhooks/verify-deliveries
    return {"x-shopify-hmac-sha256": base64.b64encode(mac(secret.encode(), body)).decode()}


DELIVERIES = [
    ("standard-webhooks-order-paid.json", "shop",
     b'{"type":"order.paid","timestamp":"2026-08-25T09:14:03.000Z","data":{"order_id":"ord_4211","customer_email":"ada@example.com","amount":4200,"currency":"eur"}}',
     {"user-agent": "Svix-Webhooks/1.76.1 (sender-Jv3xk; +https://www.svix.com/http-sender/)"},
     lambda body: standard_webhooks(SECRETS["shop"], "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", body)),
    ("stripe-order-paid.json", "stripe",
     b'{\n  "id": "evt_1PkQ2vLkdIwHu7ix0Ab1Cd2E",\n  "object": "event",\n  "api_version": "2024-06-20",\n  "created": 1787649243,\n'
     b'  "type": "order.paid",\n  "livemode": false,\n  "pending_webhooks": 1,\n  "request": {"id": null, "idempotency_key": null},\n'
     b'  "data": {"order_id": "ord_4212", "object": {"id": "cs_test_a1b2c3", "object": "checkout.session", "amount_total": 4200}}\n}',
     {"user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)", "cache-control": "no-cache"},
     lambda body: stripe(SECRETS["stripe"], body)),
    ("github-push.json", "github",
     b'{"ref":"refs/heads/main","before":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","after":"59b20b8d5c6ff8d09518454d4dd8b7b30f095ab5","repository":{"id":186853002,"full_name":"octo-org/octo-repo"},"pusher":{"name":"octocat"}}',
     {"user-agent": "GitHub-Hookshot/044aadd", "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "x-github-event": "push",
      "x-github-hook-id": "292430182", "x-github-hook-installation-target-id": "79929171", "x-github-hook-installation-target-type": "repository"},
     lambda body: github(SECRETS["github"], body)),
    ("shopify-orders-paid.json", "shopify",
     b'{"id":820982911946154508,"admin_graphql_api_id":"gid://shopify/Order/820982911946154508","email":"jon@example.com","financial_status":"paid","total_price":"403.00","currency":"USD"}',
     {"user-agent": "Shopify-Captain-Hook", "x-shopify-topic": "orders/paid", "x-shopify-shop-domain": "example.myshopify.com",
      "x-shopify-api-version": "2026-07", "x-shopify-webhook-id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
      "x-shopify-event-id": "98880550-7158-44d4-b7cd-2c97c8a091b5", "x-shopify-triggered-at": "2026-08-25T09:14:03.000Z"},
     lambda body: shopify(SECRETS["shopify"], body)),
]

for name, source, body, headers, sign in DELIVERIES:
    ev = copy.deepcopy(sample)
    route = "POST /hooks/" + source  # the stack's route for this source: no path parameters
    ev["routeKey"] = route
    ev["rawPath"] = "/hooks/" + source
    h = ev["headers"]
    h.update({"content-length": str(len(body)), "content-type": "application/json"})
    h.update(headers)
    h.update(sign(body))
    ev["headers"] = dict(sorted(h.items()))
    ev["body"] = body.decode()
    ev["isBase64Encoded"] = False
    rc = ev["requestContext"]
    del rc["authentication"]  # the sample's mutual TLS: the webhook API has none
    rc["routeKey"] = route
    rc["http"].update({"method": "POST", "path": "/hooks/" + source, "userAgent": headers["user-agent"]})
    rc["time"] = "25/Aug/2026:09:14:04 +0000"
    rc["timeEpoch"] = SIGNED_AT * 1000
    with open("receiver/testdata/" + name, "w") as f:
        json.dump(ev, f, indent=2)
        f.write("\n")
    print(name, sign(body))
