package webhook

import "errors"

// ErrSignature is matched (errors.Is) by every error that rejects a delivery: a header missing or
// malformed, a timestamp outside the tolerance, or no signature made with a configured secret.
// A receiver answers it with 401 and never processes the body.
var ErrSignature = errors.New("webhook: signature rejected")

// ErrInvalid is matched (errors.Is) by every error that blames the caller, not the delivery: an
// unknown scheme name, bad Options, an unusable secret, a bad argument to Sign. A receiver that
// sees it from Verify is misconfigured (answer 500, so the provider retries after the fix).
var ErrInvalid = errors.New("webhook: invalid argument")

// The reasons a SignatureError gives. They are a fixed, low-cardinality set, fit for a metric
// dimension; SignatureError.Detail says more.
const (
	// ReasonMissingHeader means a header the scheme needs is absent or empty.
	ReasonMissingHeader = "header missing"
	// ReasonMalformedHeader means a header is present but not of the scheme's form (repeated,
	// bad syntax, a signature of the wrong length or alphabet, too many signatures).
	ReasonMalformedHeader = "malformed header"
	// ReasonMalformedBody means a scheme that signs the body's fields (Twilio's form
	// parameters) could not read them, or the body is not the one the signed URL names.
	ReasonMalformedBody = "malformed body"
	// ReasonTimestamp means the signed timestamp is older, or further in the future, than the
	// scheme's tolerance allows.
	ReasonTimestamp = "timestamp outside tolerance"
	// ReasonNoMatch means the header is well formed but no signature in it was made by any of
	// the secrets over this body (wrong secret, tampered body or headers, or no signature of a
	// version this package verifies).
	ReasonNoMatch = "no signature matched"
)

// SignatureError rejects one delivery. It matches ErrSignature.
type SignatureError struct {
	// Scheme is the scheme's name, e.g. "stripe".
	Scheme string
	// Reason is one of the Reason constants.
	Reason string
	// Header is the canonical name of the header concerned, when there is one.
	Header string
	// Detail is a fixed human-readable explanation; it never contains request data.
	Detail string
}

// Error returns "webhook: <scheme>: <reason>: <header>: <detail>", leaving out empty parts.
func (e *SignatureError) Error() string {
	s := "webhook: " + e.Scheme + ": " + e.Reason
	if e.Header != "" {
		s += ": " + e.Header
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is ErrSignature.
func (e *SignatureError) Is(target error) bool { return target == ErrSignature }

// InvalidError blames the caller: it names the field or argument at fault. It matches ErrInvalid.
type InvalidError struct {
	// Scheme is the scheme's name, or empty when the name itself is at fault.
	Scheme string
	// Field is the Options field ("Tolerance", "Header", "Encoding", "Prefix"), or the argument
	// ("name", "secrets", "secrets[1]", "secret", "id", "now", "h") at fault.
	Field string
	// Reason says what is wrong with it. It never contains a secret.
	Reason string
}

// Error returns "webhook: <scheme>: invalid <field>: <reason>".
func (e *InvalidError) Error() string {
	s := "webhook: "
	if e.Scheme != "" {
		s += e.Scheme + ": "
	}
	return s + "invalid " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }
