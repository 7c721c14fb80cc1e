package dedup

import (
	"errors"
	"math"
	"testing"
	"time"
)

const day = 24 * time.Hour

func TestRetention(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		r         Retention
		effective time.Duration
		err       string // "", "retention" or the invalid field
	}{
		{"defaults to horizon + redrive + margin", Retention{RetryHorizon: 3 * day, RedriveWindow: 30 * day}, 47 * day, ""},
		{"an explicit keep at exactly horizon + redrive is safe", Retention{RetryHorizon: 3 * day, RedriveWindow: 30 * day, Keep: 33 * day}, 33 * day, ""},
		{"an explicit keep one second short is refused", Retention{RetryHorizon: 3 * day, RedriveWindow: 30 * day, Keep: 33*day - time.Second}, 0, "retention"},
		{"the seed's 24 h Redis TTL against a 72 h horizon is refused", Retention{RetryHorizon: 72 * time.Hour, Keep: 24 * time.Hour}, 0, "retention"},
		{"no redrive window is allowed", Retention{RetryHorizon: 3 * day}, 17 * day, ""},
		{"a missing retry horizon is refused", Retention{RedriveWindow: 30 * day}, 0, "sources.shop.retry_horizon"},
		{"a negative redrive window is refused", Retention{RetryHorizon: day, RedriveWindow: -day}, 0, "sources.shop.redrive_window"},
		{"a negative keep is refused", Retention{RetryHorizon: day, Keep: -day}, 0, "sources.shop.keep"},
		{"a horizon and window whose sum a duration cannot hold are refused", Retention{RetryHorizon: 62500 * 24 * time.Hour, RedriveWindow: 62500 * 24 * time.Hour}, 0, "sources.shop.redrive_window"},
		{"a sum the default margin takes past a duration is refused", Retention{RetryHorizon: math.MaxInt64 - 2*time.Hour, RedriveWindow: time.Hour}, 0, "sources.shop.redrive_window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Validate("shop")
			switch c.err {
			case "":
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if got := c.r.Effective(); got != c.effective {
					t.Fatalf("Effective() = %s, want %s", got, c.effective)
				}
			case "retention":
				var re *RetentionError
				if !errors.As(err, &re) || re.Source != "shop" || re.Needed != c.r.Needed() {
					t.Fatalf("got %v, want a *RetentionError for shop", err)
				}
			default:
				var ie *InvalidError
				if !errors.As(err, &ie) || ie.Field != c.err {
					t.Fatalf("got %v, want an *InvalidError naming %s", err, c.err)
				}
			}
		})
	}
}

func TestNewRefusesAConfigurationThatWouldExpireClaimsEarly(t *testing.T) {
	t.Parallel()
	_, err := New(nopAPI{}, Config{Table: "t", Sources: map[string]Retention{
		"stripe": {RetryHorizon: 3 * day, RedriveWindow: 15 * day, Keep: 7 * day},
	}})
	var re *RetentionError
	if !errors.As(err, &re) || re.Source != "stripe" {
		t.Fatalf("got %v, want a *RetentionError naming stripe", err)
	}
	if _, err := New(nopAPI{}, Config{Sources: map[string]Retention{"a": {RetryHorizon: day}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a missing table: got %v, want ErrInvalid", err)
	}
	if _, err := New(nopAPI{}, Config{Table: "t"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no sources: got %v, want ErrInvalid", err)
	}
	if _, err := New(nopAPI{}, Config{Table: "t", Sources: map[string]Retention{"Bad Name": {RetryHorizon: day}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a bad source name: got %v, want ErrInvalid", err)
	}
}

func TestRetentionStringNamesThePromises(t *testing.T) {
	t.Parallel()
	got := Retention{RetryHorizon: 3 * day, RedriveWindow: 30 * day}.String()
	if want := "keep 47d (retry horizon 3d + redrive window 30d = 33d needed)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
