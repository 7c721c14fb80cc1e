// Package executors holds the storefront's own outbox executor: the CRM, whose API takes its
// idempotency key in a header of its own.
package executors

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/oncehook/oncehook/outbox"
)

// All is every executor the application adds to the sources file's HTTP targets.
func All() map[string]outbox.Executor {
	return map[string]outbox.Executor{"crm": &CRM{URL: os.Getenv("CRM_URL")}}
}

// CRM upserts a customer. It is Bounded (MaxDuration), so the outbox checks its lease covers it.
type CRM struct {
	URL    string
	Client *http.Client
}

// MaxDuration is the longest one call takes.
func (c *CRM) MaxDuration() time.Duration { return 5 * time.Second }

// Execute sends the intent's payload with the event's idempotency key as X-Request-Key.
func (c *CRM) Execute(ctx context.Context, t outbox.Task) error {
	if c.URL == "" {
		return outbox.Permanent(fmt.Errorf("CRM_URL is not set"))
	}
	ctx, cancel := context.WithTimeout(ctx, c.MaxDuration())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.URL, bytes.NewReader(t.Payload))
	if err != nil {
		return outbox.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Key", t.IdempotencyKey)
	client := c.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := client.Do(req)
	if err != nil {
		return err // retried
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("crm: %s", resp.Status)
	default:
		return outbox.Permanent(fmt.Errorf("crm: %s", resp.Status))
	}
}
