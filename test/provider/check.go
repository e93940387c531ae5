package provider

import (
	"fmt"
	"math"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// known reports whether the input key is present and known. Unknown inputs
// (outputs of other resources during preview) decode to zero values, so they
// must not be validated.
func known(inputs property.Map, key string) bool {
	v, ok := inputs.GetOk(key)
	return ok && !v.IsComputed()
}

// checkRelPath validates a path input when it is known.
func checkRelPath(inputs property.Map, key, path string) []p.CheckFailure {
	if !known(inputs, key) {
		return nil
	}
	if _, err := cleanRelPath(path); err != nil {
		return []p.CheckFailure{{Property: key, Reason: err.Error()}}
	}
	return nil
}

// checkNonNegative validates a numeric input when it is known.
func checkNonNegative(inputs property.Map, key string, n float64) []p.CheckFailure {
	if !known(inputs, key) {
		return nil
	}
	if n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return []p.CheckFailure{{Property: key, Reason: fmt.Sprintf("%s must be a finite number >= 0, got %v", key, n)}}
	}
	return nil
}
