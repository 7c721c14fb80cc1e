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
	if answer, contentType, ok := s.(webhook.Challenger).Challenge(h, body, []string{"slack-signing-secret"}); ok {
		fmt.Println(contentType, string(answer))
	}
	// Output: text/plain 3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P
}

// Twilio signs the URL it called: verify against that URL, exactly as configured at Twilio.
// These are Twilio's documented example values (auth token 12345).
func ExampleURLVerifier() {
	s, _ := webhook.New(webhook.Twilio, webhook.Options{})
	body := []byte("CallSid=CA1234567890ABCDE&Caller=%2B14158675310&Digits=1234&From=%2B14158675310&To=%2B18005551212")
	h := http.Header{webhook.TwilioHeader: {"L/OH5YylLD5NRKLltdqwSvS0BnU="}}
	u := s.(webhook.URLVerifier)
	fmt.Println(u.VerifyURL("https://example.com/myapp.php?foo=1&bar=2", h, body, []string{"12345"}, time.Now()))
	fmt.Println(u.VerifyURL("https://example.com/myapp.php?foo=1", h, body, []string{"12345"}, time.Now()) != nil)
	// Output:
	// <nil>
	// true
}

// Discord signs with its private key; the receiver holds only the application's public key.
func ExamplePublicKeyScheme() {
	s, _ := webhook.New(webhook.Discord, webhook.Options{})
	const publicKey = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a" // RFC 8032 test key 1
	body := []byte(`{"version":1,"application_id":"1234560123453231555","type":0}`)
	h := http.Header{}
	_ = s.Sign(h, body, "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "", time.Now()) // Discord's side
	_, public := s.(webhook.PublicKeyScheme)
	fmt.Println(public, s.Verify(h, body, []string{publicKey}, time.Now()))
	// Output: true <nil>
}
