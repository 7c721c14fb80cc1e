package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// SecretsManagerAPI is the part of the Secrets Manager client the resolver uses.
type SecretsManagerAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SSMAPI is the part of the SSM client the resolver uses.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Resolver fetches secrets from where a SecretRef says they are.
type Resolver struct {
	SecretsManager SecretsManagerAPI
	SSM            SSMAPI
	// Getenv reads environment variables; os.Getenv when nil.
	Getenv func(string) string
}

// Resolve returns the values of refs, in order. A missing or empty secret is an error naming
// its reference (never its value).
func (r *Resolver) Resolve(ctx context.Context, refs []SecretRef) ([]string, error) {
	return r.resolveAll(ctx, refs, false)
}

// resolveAll resolves refs; held is a re-read, for which a reference its store says no longer
// exists (deleted, scheduled for deletion, emptied) is revoked and left out, rather than failing
// the re-read, which would keep the revoked value held for the life of the instance. At start a
// missing secret stays an error: it is a misconfiguration.
func (r *Resolver) resolveAll(ctx context.Context, refs []SecretRef, held bool) ([]string, error) {
	out := make([]string, 0, len(refs))
	for _, ref := range refs {
		v, err := r.resolve(ctx, ref)
		switch {
		case held && (v == "" && err == nil || revoked(err)):
			continue
		case err != nil:
			return nil, fmt.Errorf("secret %s: %w", ref, err)
		case v == "":
			return nil, fmt.Errorf("secret %s is empty", ref)
		}
		out = append(out, v)
	}
	return out, nil
}

// revoked reports whether err is a secret store's answer that the secret is gone: Secrets
// Manager's ResourceNotFoundException or a secret scheduled for deletion, SSM's
// ParameterNotFound.
func revoked(err error) bool {
	_, nf := errors.AsType[*smtypes.ResourceNotFoundException](err)
	_, pnf := errors.AsType[*ssmtypes.ParameterNotFound](err)
	ire, invalid := errors.AsType[*smtypes.InvalidRequestException](err)
	return nf || pnf || invalid && strings.Contains(strings.ToLower(ire.ErrorMessage()), "deletion")
}

func (r *Resolver) resolve(ctx context.Context, ref SecretRef) (string, error) {
	switch {
	case ref.Env != "":
		if r.Getenv != nil {
			return r.Getenv(ref.Env), nil
		}
		return os.Getenv(ref.Env), nil
	case ref.SecretsManager != "":
		if r.SecretsManager == nil {
			return "", errors.New("no Secrets Manager client configured")
		}
		out, err := r.SecretsManager.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(ref.SecretsManager)})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.SecretString), nil
	case ref.SSM != "":
		if r.SSM == nil {
			return "", errors.New("no SSM client configured")
		}
		out, err := r.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(ref.SSM), WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", err
		}
		if out.Parameter == nil {
			return "", nil
		}
		return aws.ToString(out.Parameter.Value), nil
	}
	return "", errors.New("empty reference")
}

// Secrets holds each source's resolved secrets for the life of a function instance. It re-reads
// them after a signature failure at most once per MinRefresh (Refresh), so a rotation is picked
// up without a redeploy and forged requests cannot flood the store with calls; and, with MaxAge,
// once they are older than that (RefreshStale), so a secret revoked at its store stops
// verifying on a warm instance within MaxAge.
type Secrets struct {
	resolver   *Resolver
	refs       map[string][]SecretRef
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	mu      sync.RWMutex
	values  map[string][]string
	fetched map[string]time.Time
}

// A SecretsOption configures NewSecrets.
type SecretsOption func(*Secrets)

// MaxAge makes RefreshStale re-read a source's secrets once they were read longer than d ago
// (0, the default, never). DefaultMaxAge is what the functions use.
func MaxAge(d time.Duration) SecretsOption { return func(s *Secrets) { s.maxAge = d } }

// Clock sets the clock the refresh intervals are measured on (time.Now by default).
func Clock(now func() time.Time) SecretsOption { return func(s *Secrets) { s.now = now } }

// DefaultMaxAge is how long the functions use a source's secrets before reading them again: the
// longest a secret revoked at its store keeps verifying on a warm instance.
const DefaultMaxAge = 5 * time.Minute

// NewSecrets resolves every source's secrets now: a function whose secrets cannot be read
// does not start.
func NewSecrets(ctx context.Context, f *File, r *Resolver, minRefresh time.Duration, opts ...SecretsOption) (*Secrets, error) {
	s := &Secrets{
		resolver:   r,
		refs:       make(map[string][]SecretRef, len(f.Sources)),
		minRefresh: minRefresh,
		now:        time.Now,
		values:     make(map[string][]string, len(f.Sources)),
		fetched:    make(map[string]time.Time, len(f.Sources)),
	}
	for _, o := range opts {
		o(s)
	}
	for _, name := range f.Names() {
		if keys := f.Sources[name].PublicKeys; len(keys) > 0 {
			// A public-key scheme's keys are in the file: nothing to fetch or refresh.
			s.values[name] = keys
			continue
		}
		vals, err := r.Resolve(ctx, f.Sources[name].Secrets)
		if err != nil {
			return nil, fmt.Errorf("sources.%s: %w", name, err)
		}
		s.refs[name] = f.Sources[name].Secrets
		s.values[name] = vals
		s.fetched[name] = s.now()
	}
	return s, nil
}

// Get returns the source's current secrets.
func (s *Secrets) Get(source string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.values[source]
}

// Refresh re-reads the source's secrets unless they were read within MinRefresh. It reports
// whether the values changed. A failed read keeps the values held.
func (s *Secrets) Refresh(ctx context.Context, source string) (bool, error) {
	return s.refresh(ctx, source, s.minRefresh)
}

// RefreshStale re-reads the source's secrets when they were read more than MaxAge ago. A
// failed read keeps the values held (a store that cannot be reached must not stop deliveries)
// and is returned, for the caller to count; the next try is MaxAge later. Without MaxAge it
// does nothing.
func (s *Secrets) RefreshStale(ctx context.Context, source string) error {
	if s.maxAge <= 0 {
		return nil
	}
	s.mu.RLock()
	last, ok := s.fetched[source]
	s.mu.RUnlock()
	if !ok || s.now().Sub(last) < s.maxAge {
		return nil
	}
	_, err := s.refresh(ctx, source, s.maxAge)
	return err
}

func (s *Secrets) refresh(ctx context.Context, source string, within time.Duration) (bool, error) {
	s.mu.Lock()
	last, ok := s.fetched[source]
	if !ok || len(s.refs[source]) == 0 || s.now().Sub(last) < within {
		s.mu.Unlock()
		return false, nil
	}
	s.fetched[source] = s.now() // claim the refresh before the slow call
	s.mu.Unlock()

	vals, err := s.resolver.resolveAll(ctx, s.refs[source], true)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := !slices.Equal(vals, s.values[source])
	s.values[source] = vals
	return changed, nil
}
