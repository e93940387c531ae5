package fault

import (
	"errors"
	"fmt"
)

// Error is a failure with the condition reason the Stack's status should report.
type Error struct {
	// Reason is a condition reason from api/v1.
	Reason string
	// Stalled is true when only a change made by a human can clear the failure.
	Stalled bool
	Err     error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Retry reports a failure that clears by itself once the world catches up.
func Retry(reason, format string, args ...any) error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Stall reports a failure that needs a human.
func Stall(reason, format string, args ...any) error {
	return &Error{Reason: reason, Stalled: true, Err: fmt.Errorf(format, args...)}
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
