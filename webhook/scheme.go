package webhook

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The names New accepts.
const (
	// StandardWebhooks names the Standard Webhooks scheme (webhook-id, webhook-timestamp,
	// webhook-signature; https://www.standardwebhooks.com).
	StandardWebhooks = "standard-webhooks"
	// Stripe names Stripe's scheme (Stripe-Signature).
	Stripe = "stripe"
	// GitHub names GitHub's scheme (X-Hub-Signature-256).
	GitHub = "github"
	// Shopify names Shopify's scheme (X-Shopify-Hmac-Sha256).
	Shopify = "shopify"
	// HMACSHA256 names the generic scheme: an HMAC-SHA256 of the body in a configured header.
	HMACSHA256 = "hmac-sha256"
	// Svix names Standard Webhooks under Svix's header names (svix-id, svix-timestamp,
	// svix-signature): Clerk, Resend, OpenAI and the other senders Svix runs.
	Svix = "svix"
	// Slack names Slack's scheme (X-Slack-Signature: v0=..., X-Slack-Request-Timestamp).
	Slack = "slack"
	// Zoom names Zoom's scheme (X-Zm-Signature: v0=..., X-Zm-Request-Timestamp).
	Zoom = "zoom"
	// Paddle names Paddle Billing's scheme (Paddle-Signature: ts=...;h1=...).
	Paddle = "paddle"
	// PagerDuty names PagerDuty's v3 webhooks scheme (X-PagerDuty-Signature: v1=...[,v1=...]).
	PagerDuty = "pagerduty"
	// Linear names Linear's scheme (Linear-Signature).
	Linear = "linear"
	// Intercom names Intercom's scheme (X-Hub-Signature: sha1=..., HMAC-SHA1 of the body).
	Intercom = "intercom"
	// Twilio names Twilio's scheme (X-Twilio-Signature over the URL and the form parameters).
	Twilio = "twilio"
	// Square names Square's scheme (X-Square-Hmacsha256-Signature over the notification URL
	// and the body).
	Square = "square"
	// Discord names Discord's scheme (X-Signature-Ed25519 with the application's public key).
	Discord = "discord"
	// SendGrid names SendGrid's signed Event Webhook (ECDSA P-256 with SendGrid's public key).
	SendGrid = "sendgrid"
	// Twitch names Twitch EventSub's scheme (Twitch-Eventsub-Message-Signature over the message
	// id, timestamp and body).
	Twitch = "twitch"
)

// Names lists every scheme New accepts.
var Names = []string{StandardWebhooks, Svix, Stripe, GitHub, Shopify, Slack, Zoom, Paddle, PagerDuty, Linear, Intercom, Twilio, Square, Discord, SendGrid, Twitch, HMACSHA256}

// Scheme verifies (and, for tests and the CLI, produces) one provider's webhook signatures.
// A Scheme is safe for concurrent use.
type Scheme interface {
	// Name returns the name the scheme was made with, e.g. "stripe".
	Name() string
	// Verify returns nil when one of secrets signed the delivery (h: request headers, canonical
	// keys as in net/http; body: raw bytes as received), or a *SignatureError (ErrSignature)
	// giving the reason. It never panics on hostile input, and compares in constant time.
	//
	// A delivery is accepted if ANY secret matches ANY signature in the header, so secrets can
	// be rotated on either side. Every secret must be usable: when none is given, or one does
	// not decode, Verify returns an *InvalidError (ErrInvalid) naming it before looking at the
	// request, since that is the receiver's fault.
	Verify(h http.Header, body []byte, secrets []string, now time.Time) error
	// Sign sets on h the headers the provider would send for body, signed with secret, at now.
	// id is the message/delivery id for schemes that sign one (Standard Webhooks' webhook-id);
	// others ignore it.
	Sign(h http.Header, body []byte, secret string, id string, now time.Time) error
}

// Options configures New. The zero value suits every provider scheme.
type Options struct {
	// Tolerance is how far the signed time may be from now, either way, for the schemes that
	// sign one (in a header, or Linear's webhookTimestamp in the body): 0 means the scheme's
	// default, DefaultTolerance(name). It must not be set for the schemes without a signed time.
	Tolerance time.Duration

	// URL is the URL the provider calls, exactly as configured there, for the schemes that
	// sign it ("twilio", "square"; see URLVerifier), and only for them.
	URL string

	// Header, Encoding and Prefix configure the generic "hmac-sha256" scheme only.

	// Header is the header carrying the signature, e.g. "X-Signature" (required).
	Header string
	// Encoding is the digest's encoding: EncodingHex ("hex", the default) or EncodingBase64
	// (padded standard base64).
	Encoding string
	// Prefix is an optional literal before the digest, e.g. "sha256=".
	Prefix string
}

// New returns the named scheme (one of Names). Unknown names or bad options give an
// *InvalidError naming the field.
func New(name string, opts Options) (Scheme, error) {
	if !slices.Contains(Names, name) {
		return nil, &InvalidError{Field: "name", Reason: "unknown scheme " + quote(name) + "; want one of " + strings.Join(Names, ", ")}
	}
	if err := checkOptions(name, opts); err != nil {
		return nil, err
	}
	tolerance := cmp.Or(opts.Tolerance, DefaultTolerance(name))
	switch name {
	case StandardWebhooks, Svix, Stripe, Slack, Zoom, Paddle, Twitch:
		return newTimestamped(name, tolerance), nil
	case Discord, SendGrid:
		return &publicKeyScheme{newTimestamped(name, tolerance)}, nil
	case Twilio, Square:
		return newURLScheme(name, opts.URL)
	case Linear:
		s := newBodyScheme(Linear, LinearHeader, "", EncodingHex)
		s.tolerance = tolerance
		return s, nil
	case GitHub:
		return newBodyScheme(GitHub, GitHubHeader, "sha256=", EncodingHex), nil
	case Shopify:
		return newBodyScheme(Shopify, ShopifyHeader, "", EncodingBase64), nil
	case PagerDuty:
		s := newBodyScheme(PagerDuty, PagerDutyHeader, "v1=", EncodingHex)
		s.list = ","
		return s, nil
	case Intercom:
		s := newBodyScheme(Intercom, IntercomHeader, "sha1=", EncodingHex)
		s.ring.hmacSHA1()
		return s, nil
	}
	return newBodyScheme(HMACSHA256, http.CanonicalHeaderKey(opts.Header), opts.Prefix, cmp.Or(opts.Encoding, EncodingHex)), nil
}

// defaultTolerances are the schemes' default tolerances. A tolerance must let every legitimate
// attempt through: where the provider documents that each attempt is signed when it is sent,
// its own check (a retry arrives freshly signed); where it does not, a retry may carry the
// first attempt's signature, so the tolerance covers the provider's last retry (at most
// MaxTolerance). docs/receiver.md ("Timestamp tolerances and retries") has each row's sources.
var defaultTolerances = map[string]time.Duration{
	// Each attempt signed anew, as documented.
	StandardWebhooks: 5 * time.Minute,  // webhook-timestamp is the attempt's; the reference libraries' check
	Svix:             5 * time.Minute,  // "a timestamp for when the webhook attempt occurred"; Svix's libraries
	Stripe:           5 * time.Minute,  // "a new signature and timestamp for the new delivery attempt"; Stripe's libraries
	Twitch:           10 * time.Minute, // the time Twitch sent the message; Twitch's guide
	// Not documented. Paddle's SDKs refuse a signature over 5 s old, a check Paddle keeps
	// (github.com/PaddleHQ/paddle-node-sdk/issues/30) through a 3-day retry schedule, which
	// holds only if each attempt is signed when sent; 3 days is past MaxTolerance anyway.
	Paddle: 5 * time.Second,
	// Not documented: the last retry is covered.
	Slack:    10 * time.Minute, // retries nearly immediately, after 1 and after 5 minutes
	Zoom:     90 * time.Minute, // 5, 25 and 85 minutes after the first attempt
	Discord:  15 * time.Minute, // for up to 10 minutes
	SendGrid: 24 * time.Hour,   // for up to 24 hours
	// Linear retries after 1 minute, 1 hour, then 6 hours (linear.app/developers/webhooks);
	// its retries are reported to resend the first body, webhookTimestamp included
	// (github.com/vercel/eve/issues/1570), so its SDK's 60 s check would refuse every one.
	Linear: 8 * time.Hour,
}

// DefaultTolerance is the tolerance New gives the named scheme when Options.Tolerance is 0 (its
// provider's own check, or long enough for its last retry), and 0 for a scheme that signs no time.
func DefaultTolerance(name string) time.Duration { return defaultTolerances[name] }

// MaxTolerance is the largest Options.Tolerance New accepts. A tolerance is how long a
// captured delivery verifies for; past a day it no longer allows for clock skew or a provider's
// queueing, only for replays (a receiver's dedup claim must also outlive it).
const MaxTolerance = 24 * time.Hour

// checkOptions refuses the options the named scheme does not take, and bad values of those it
// does.
func checkOptions(name string, opts Options) error {
	invalid := func(field, reason string) error { return &InvalidError{Scheme: name, Field: field, Reason: reason} }
	switch {
	case DefaultTolerance(name) == 0 && opts.Tolerance != 0:
		return invalid("Tolerance", name+" signatures carry no timestamp")
	case opts.Tolerance < 0:
		return invalid("Tolerance", "must not be negative")
	case opts.Tolerance > MaxTolerance:
		return invalid("Tolerance", "must be at most "+MaxTolerance.String()+": a captured delivery verifies for as long as the tolerance")
	case opts.URL != "" && name != Twilio && name != Square:
		return invalid("URL", "only the schemes that sign the URL (twilio, square) take it")
	case name != HMACSHA256:
		for _, f := range [...]struct{ field, value string }{
			{"Header", opts.Header}, {"Encoding", opts.Encoding}, {"Prefix", opts.Prefix},
		} {
			if f.value != "" {
				return invalid(f.field, "only the hmac-sha256 scheme takes it")
			}
		}
	case opts.Header == "":
		return invalid("Header", "is required")
	case !httpguts.ValidHeaderFieldName(opts.Header):
		return invalid("Header", "is not an HTTP header name")
	case opts.Encoding != "" && opts.Encoding != EncodingHex && opts.Encoding != EncodingBase64:
		return invalid("Encoding", quote(opts.Encoding)+` is not "hex" or "base64"`)
	case len(opts.Prefix) > 64 || strings.ContainsFunc(opts.Prefix, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return invalid("Prefix", "must be at most 64 visible ASCII characters, without spaces")
	}
	return nil
}

// CheckSecrets returns an *InvalidError naming the first secret s cannot use, as Verify would,
// or nil. Called at start, it stops a deployment with a bad secret instead of failing every
// delivery, and prepares the keys so the first delivery does not pay for it.
func CheckSecrets(s Scheme, secrets []string) error {
	if c, ok := s.(interface{ checkSecrets([]string) error }); ok {
		return c.checkSecrets(secrets)
	}
	return nil
}

// quote quotes s for an error message, truncated so a huge argument cannot flood a log.
func quote(s string) string {
	if len(s) > 64 {
		return strconv.QuoteToASCII(s[:64]) + "..."
	}
	return strconv.QuoteToASCII(s)
}
