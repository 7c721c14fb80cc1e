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
