// Package webhook verifies webhook signatures over the raw body, in constant time, for the
// schemes oncehook receives (Names): Standard Webhooks and its Svix header form, Stripe, GitHub,
// Shopify, Slack, Paddle, PagerDuty, Linear, Twitch EventSub, and a configurable HMAC-SHA256
// header. Schemes whose providers send control messages (Slack's and Twitch's challenges)
// implement Challenger.
//
// A receiver makes one Scheme per source with New, checks its secrets once with CheckSecrets,
// then calls Verify with the request's headers, the body exactly as received, the source's
// secrets and the current time:
//
//	s, err := webhook.New("stripe", webhook.Options{})
//	...
//	switch err := s.Verify(req.Header, body, secrets, time.Now()); {
//	case err == nil: // authentic: go on to the dedup claim
//	case errors.Is(err, webhook.ErrSignature): // 401; the body is never parsed
//	case errors.Is(err, webhook.ErrInvalid): // misconfigured receiver: 500
//	}
//
// Several secrets may be given: a delivery is accepted if any secret matches any signature in
// its header, so a secret can be rolled on the provider's side (which then sends one signature
// per active secret) or on ours (old and new both configured) without losing a delivery.
//
// Verification allocates nothing once a secret has been seen: secrets are decoded and keyed
// once per scheme (see keys.go), headers are parsed in place (see parse.go). What a delivery
// costs is the HMAC over its body, once per configured secret at most.
//
// Sign produces the headers a provider would send, for tests and for the operator's CLI
// (replaying a recorded body to a receiver).
package webhook
