package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

const (
	randomAlphabet      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	randomDefaultLength = 16
	randomMinLength     = 1
	randomMaxLength     = 1024
)

// Random generates a secret alphanumeric string once, at create.
//
// It has no Update, so any input change replaces it, and no custom Read: the
// default Read returns the stored state unchanged, so the result is stable.
type Random struct{}

// RandomArgs are the inputs of a Random.
type RandomArgs struct {
	Length *int `pulumi:"length,optional"`
}

// RandomState is the checkpointed state of a Random.
type RandomState struct {
	Length int    `pulumi:"length"`
	Result string `pulumi:"result" provider:"secret"`
}

var (
	_ infer.CustomCheck[RandomArgs]                       = (*Random)(nil)
	_ infer.ExplicitDependencies[RandomArgs, RandomState] = (*Random)(nil)
)

// Annotate describes the resource.
func (r *Random) Annotate(a infer.Annotator) {
	a.SetToken("index", "Random")
	a.Describe(&r, "A random alphanumeric string, generated once with crypto/rand and always secret.")
}

// Annotate describes the inputs.
func (a *RandomArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Length, fmt.Sprintf("Length of the string, %d..%d. Changing it replaces the resource.",
		randomMinLength, randomMaxLength))
	an.SetDefault(&a.Length, randomDefaultLength)
}

// Annotate describes the outputs.
func (s *RandomState) Annotate(a infer.Annotator) {
	a.Describe(&s.Length, "Length of the string.")
	a.Describe(&s.Result, "The random string. Always secret.")
}

// WireDependencies marks result as always secret.
func (*Random) WireDependencies(f infer.FieldSelector, _ *RandomArgs, state *RandomState) {
	f.OutputField(&state.Result).AlwaysSecret()
}

// Check applies the default length and validates it.
func (*Random) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[RandomArgs], error) {
	args, failures, err := infer.DefaultCheck[RandomArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[RandomArgs]{Inputs: args, Failures: failures}, err
	}
	// An unknown length (preview) cannot be validated yet.
	if v, ok := req.NewInputs.GetOk("length"); (!ok || !v.IsComputed()) && args.Length != nil {
		if err := validateRandomLength(*args.Length); err != nil {
			failures = append(failures, p.CheckFailure{Property: "length", Reason: err.Error()})
		}
	}
	return infer.CheckResponse[RandomArgs]{Inputs: args, Failures: failures}, nil
}

// Create generates the string.
func (*Random) Create(
	ctx context.Context, req infer.CreateRequest[RandomArgs],
) (infer.CreateResponse[RandomState], error) {
	length := randomDefaultLength
	if req.Inputs.Length != nil {
		length = *req.Inputs.Length
	}
	if err := validateRandomLength(length); err != nil {
		return infer.CreateResponse[RandomState]{}, err
	}
	state := RandomState{Length: length}
	if req.DryRun {
		return infer.CreateResponse[RandomState]{Output: state}, nil
	}
	result, err := randomString(rand.Reader, length)
	if err != nil {
		return infer.CreateResponse[RandomState]{}, err
	}
	// The ID must not reveal the secret, so it is drawn separately.
	var idBytes [8]byte
	if _, err := io.ReadFull(rand.Reader, idBytes[:]); err != nil {
		return infer.CreateResponse[RandomState]{}, fmt.Errorf("generating id: %w", err)
	}
	state.Result = result
	return infer.CreateResponse[RandomState]{ID: hex.EncodeToString(idBytes[:]), Output: state}, nil
}

func validateRandomLength(n int) error {
	if n < randomMinLength || n > randomMaxLength {
		return fmt.Errorf("length must be between %d and %d, got %d", randomMinLength, randomMaxLength, n)
	}
	return nil
}

// randomString returns n characters drawn uniformly from randomAlphabet using
// bytes from r. Bytes that would bias the draw are rejected.
func randomString(r io.Reader, n int) (string, error) {
	const limit = 256 - 256%len(randomAlphabet) // largest multiple of the alphabet size <= 256
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("reading randomness: %w", err)
		}
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			out = append(out, randomAlphabet[int(b)%len(randomAlphabet)])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}
