//go:build !faultinject

package launch

import (
	"errors"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// FaultInjection reports whether this binary can inject faults (built with -tags faultinject:
// the local stack's builds only, never `make synth`'s).
const FaultInjection = false

// dynamoDBFaults refuses ONCEHOOK_FAULTS: this binary has no fault injector in it.
func dynamoDBFaults(_ *slog.Logger, value string) ([]func(*dynamodb.Options), error) {
	if value != "" {
		return nil, errors.New("ONCEHOOK_FAULTS is set, and this binary was built without fault injection (-tags faultinject, local builds only)")
	}
	return nil, nil
}
