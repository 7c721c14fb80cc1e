package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/oncehook/oncehook/webhook"
)

func Example() {
	stripe, err := webhook.New("stripe", webhook.Options{})
	if err != nil {
		panic(err)
	}
	// While a secret is being rolled, both are configured; either one verifies.
	secrets := []string{"whsec_new_secret", "whsec_old_secret"}
	if err := webhook.CheckSecrets(stripe, secrets); err != nil {
		panic(err) // a misconfigured receiver should not start
	}

	body := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	sent := time.Unix(1_700_000_000, 0)
	h := http.Header{}
	_ = stripe.Sign(h, body, "whsec_old_secret", "", sent) // what Stripe would send

	fmt.Println(stripe.Verify(h, body, secrets, sent.Add(time.Minute)))

	err = stripe.Verify(h, body, secrets, sent.Add(time.Hour))
	var se *webhook.SignatureError
	fmt.Println(errors.Is(err, webhook.ErrSignature), errors.As(err, &se) && se.Reason == webhook.ReasonTimestamp)
	// Output:
	// <nil>
	// true true
}

// A provider's control message: Slack proves an endpoint with a signed url_verification whose
// challenge must come back. Verify first, then ask the scheme.
func ExampleChallenger() {
	s, _ := webhook.New(webhook.Slack, webhook.Options{})
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	h := http.Header{}
	_ = s.Sign(h, body, "slack-signing-secret", "", time.Now())
	if err := s.Verify(h, body, []string{"slack-signing-secret"}, time.Now()); err != nil {
		fmt.Println(err)
		return
	}
	if answer, contentType, ok := s.(webhook.Challenger).Challenge(h, body); ok {
		fmt.Println(contentType, string(answer))
	}
	// Output: text/plain 3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P
}
