package webhook

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"hash"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
)

// Secrets are prepared once, not per delivery: decoding a whsec_ secret, keying an HMAC or
// parsing a public key allocates. Each scheme keeps a keyring, a copy-on-write map from the
// configured string to its prepared key, read with one atomic load and one map lookup; an HMAC
// key pools its keyed states, so concurrent Verify calls never share one. A cache, rather than
// an exported prepared-keys type, keeps the Scheme interface on the configuration's strings.
// Secrets never come from requests: the bound (maxKeys) only matters if a caller invents them.

// maxKeys bounds a keyring. Rotation needs two or three secrets per scheme instance.
const maxKeys = 32

// keyring prepares and caches the keys of one scheme instance.
type keyring struct {
	scheme string
	decode func(secret string) ([]byte, error)
	// public parses a public-key scheme's keys, in place of decode and the HMAC.
	public func(key string) (any, error)
	sep    string // what follows each signed field before the body: "." for most schemes
	hash   func() hash.Hash
	size   int // the digest's length: sha256.Size, or sha1.Size for the SHA-1 schemes

	m  atomic.Pointer[map[string]*key]
	mu sync.Mutex // serialises writers of m
}

// key is one prepared secret or public key, or the reason it is unusable.
type key struct {
	err  error // an *InvalidError without its Field; see keyring.check
	pub  any
	pool sync.Pool // of *macState
}

// macState is one keyed HMAC with its scratch space, reused through key.pool.
type macState struct {
	h       hash.Hash
	scratch []byte // the signed prefix (id, timestamp, separators) before the body
	sum     [sha256.Size]byte
}

// newKeyring is a keyring of HMAC-SHA256 keys whose bytes are the secrets as written (all but
// Standard Webhooks' whsec_ secrets; a scheme sets what differs).
func newKeyring(scheme string) *keyring {
	return &keyring{scheme: scheme, decode: rawSecret, sep: ".", hash: sha256.New, size: sha256.Size}
}

// get returns the prepared key for secret, preparing it on first use.
func (r *keyring) get(secret string) *key {
	if m := r.m.Load(); m != nil {
		if k, ok := (*m)[secret]; ok {
			return k
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var old map[string]*key
	if m := r.m.Load(); m != nil {
		old = *m
	}
	if k, ok := old[secret]; ok {
		return k
	}
	k := r.prepare(secret)
	next := make(map[string]*key, len(old)+1)
	if len(old) < maxKeys {
		maps.Copy(next, old)
	}
	next[secret] = k
	r.m.Store(&next)
	return k
}

func (r *keyring) prepare(secret string) *key {
	invalid := func(reason string) *key { return &key{err: &InvalidError{Scheme: r.scheme, Reason: reason}} }
	if r.public != nil {
		pub, err := r.public(secret)
		if err != nil {
			return invalid(err.Error())
		}
		return &key{pub: pub}
	}
	if secret == "" {
		return invalid("the secret is empty")
	}
	raw, err := r.decode(secret)
	if err != nil {
		return invalid(err.Error())
	}
	if len(raw) == 0 {
		return invalid("the secret decodes to no bytes")
	}
	k := &key{}
	k.pool.New = func() any { return &macState{h: hmac.New(r.hash, raw)} }
	return k
}

// check returns an *InvalidError naming the first unusable secret, or nil. Every secret must be
// usable: a typo in the secret being rotated in must fail loudly at once, not silently never
// match once the old secret is retired.
func (r *keyring) check(secrets []string) error {
	if len(secrets) == 0 {
		what := "secret"
		if r.public != nil {
			what = "public key"
		}
		return &InvalidError{Scheme: r.scheme, Field: "secrets", Reason: "no " + what + " given"}
	}
	for i, s := range secrets {
		if k := r.get(s); k.err != nil {
			return k.named("secrets[" + strconv.Itoa(i) + "]")
		}
	}
	return nil
}

// named is k's error naming the field at fault.
func (k *key) named(field string) error {
	e := *k.err.(*InvalidError)
	e.Field = field
	return &e
}

// mac sets out to HMAC(key, f1 sep f2 sep ... body), its first size bytes (the rest zero). The
// fields are copied into the pooled scratch buffer so that nothing escapes to the heap.
func (r *keyring) mac(k *key, out *[sha256.Size]byte, body []byte, fields ...string) {
	st := k.pool.Get().(*macState)
	st.h.Reset()
	if len(fields) > 0 {
		st.scratch = st.scratch[:0]
		for _, f := range fields {
			st.scratch = append(append(st.scratch, f...), r.sep...)
		}
		st.h.Write(st.scratch)
	}
	st.h.Write(body)
	st.h.Sum(st.sum[:0])
	*out = st.sum // a SHA-1 sum leaves the tail zero
	k.pool.Put(st)
}

// signatures holds the candidate signatures parsed from one header, decoded, on the stack; a
// SHA-1 digest fills the first sha1.Size bytes of its slot.
type signatures struct {
	sig [maxSignatures][sha256.Size]byte
	n   int
}

// maxSignatures bounds the signatures read from one header: a rotation sends two, Stripe's test
// mode adds a v0 (not kept). More is hostile, and is refused as malformed.
const maxSignatures = 8

// matches reports, in constant time over the candidates, whether the first size bytes of sum
// equal any of them.
func (s *signatures) matches(sum *[sha256.Size]byte, size int) bool {
	eq := 0
	for i := 0; i < s.n; i++ {
		eq |= subtle.ConstantTimeCompare(sum[:size], s.sig[i][:size])
	}
	return eq == 1
}

// anySecret reports whether one of secrets (all already checked) signed fields and body with one
// of the candidate signatures.
func (r *keyring) anySecret(secrets []string, sigs *signatures, body []byte, fields ...string) bool {
	var sum [sha256.Size]byte
	for _, s := range secrets {
		r.mac(r.get(s), &sum, body, fields...)
		if sigs.matches(&sum, r.size) {
			return true
		}
	}
	return false
}

// sign computes the MAC of fields and body with secret, for Sign.
func (r *keyring) sign(secret string, body []byte, fields ...string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	k := r.get(secret)
	if k.err != nil {
		return sum, k.named("secret")
	}
	r.mac(k, &sum, body, fields...)
	return sum, nil
}

// rawSecret is a keyring's default decoding: the secret's bytes as written.
func rawSecret(s string) ([]byte, error) { return []byte(s), nil }

// hmacSHA1 makes the ring key HMAC-SHA1 (Intercom, Twilio).
func (r *keyring) hmacSHA1() { r.hash, r.size = sha1.New, sha1.Size }
